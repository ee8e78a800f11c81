package session

import "github.com/longca/longca/sim"

// The layouts simulate's estimates count (sim.Laid: sim.ZigzagLaid, sim.ContiguousLaid,
// sim.BalancedLaid, and their forms before the documents are drawn) are computed in
// package sim, beside the memory they feed (sim.MemoryBytesIn); here they meet the
// sweep's flags.

// laidSeconds bounds the CPU time of one case of n GPUs whose layout of the mask (of
// slices slices) is l, each traced rank making walks sub-masks (sim.LaidSeconds), with
// the sweep's passes and the simulation's --exact-ranks and --sampled-ranks.
func (o *Simulation) laidSeconds(n int, l sim.Laid, walks int, slices float64, seqlen int) float64 {
	return sim.LaidSeconds(n, l, walks, slices, seqlen, len(o.Sweep.Passes), o.Exact, o.Sampled)
}
