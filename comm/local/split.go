package local

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/longca/longca/comm"
)

// Split makes sub-groups: the ranks that pass the same color form one, ordered by key
// (ties by rank). It is collective over the group.
func (c *Comm) Split(color, key int) (comm.Comm, error) {
	// The (color, key) pairs travel as host bytes whatever the Mover: they are control.
	var mine [16]byte
	binary.LittleEndian.PutUint64(mine[:], uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	for r := range c.Size() {
		c.g.boxes[c.rank][r][tagColl].put(hostMsg(mine[:]))
	}
	all := make([][2]int, c.Size())
	deadline := c.deadline()
	for r := range all {
		m, err := c.fetch("split", tagColl, r, deadline)
		if err != nil {
			return nil, err
		}
		b, ok := m.(hostMsg)
		if !ok || len(b) != 16 {
			return nil, fmt.Errorf("local: split: rank %d is in another collective", r)
		}
		all[r] = [2]int{int(int64(binary.LittleEndian.Uint64(b))), int(int64(binary.LittleEndian.Uint64(b[8:])))}
	}
	var ranks []int
	for r, ck := range all {
		if ck[0] == color {
			ranks = append(ranks, r)
		}
	}
	sort.SliceStable(ranks, func(i, j int) bool { return all[ranks[i]][1] < all[ranks[j]][1] })
	members := make([]int, len(ranks))
	me := -1
	for i, r := range ranks {
		members[i] = c.g.members[r]
		if r == c.rank {
			me = i
		}
	}
	if me < 0 {
		return nil, fmt.Errorf("local: split: rank %d missing from its own color %d", c.rank, color)
	}
	k := groupKey{c.g, c.splitSeq, color}
	c.splitSeq++
	c.w.mu.Lock()
	g, ok := c.w.groups[k]
	if !ok {
		g = c.w.newGroup(members)
		c.w.groups[k] = g
	}
	c.w.mu.Unlock()
	return &Comm{w: c.w, g: g, rank: me}, nil
}
