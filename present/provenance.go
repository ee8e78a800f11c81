package present

import (
	"fmt"
	"sort"
	"strings"

	"github.com/longca/longca/results"
)

// ProvenanceLine says where the measured rows of pass ("" every pass; CP rows with cp, else
// the others) ran: the host, the card (its name and the start of its UUID, device_uuid), longca's
// version and the environment's settings (env), each value with its count of rows where the
// rows hold more than one: "ran on: host vm; NVIDIA H200 GPU-b7e54e17; longca f4ad51e; env
// NCCL_NVLS_ENABLE=0". "" where no row was measured.
func ProvenanceLine(rows []results.Row, pass string, cp bool) string {
	type tally struct {
		n     map[string]int
		order []string
	}
	add := func(t *tally, v string) {
		if t.n == nil {
			t.n = map[string]int{}
		}
		if t.n[v] == 0 {
			t.order = append(t.order, v)
		}
		t.n[v]++
	}
	var host, card, version, env tally
	ranks, world := map[int64]bool{}, int64(1)
	for _, r := range rows {
		if !measured(r, pass, cp) {
			continue
		}
		ranks[r.Rank], world = true, max(world, r.WorldSize)
		add(&host, r.Host)
		c := ShortDevice(r.Device)
		if u := r.DeviceUUID; u != "" {
			if i := strings.IndexByte(u, '-'); i >= 0 && len(u) >= i+9 {
				u = u[:i+9] // GPU-b7e54e17: the first group, enough to tell cards apart in a table
			}
			c += " " + u
		}
		add(&card, c)
		add(&version, r.Version)
		e := envPart(r.Env)
		switch {
		case r.Env == "":
			e = "not recorded" // a file written before the column
		case e == "":
			e = "none set"
		}
		add(&env, e)
	}
	if len(host.order) == 0 {
		return ""
	}
	part := func(t tally) string {
		if len(t.order) == 1 {
			return orDash(t.order[0])
		}
		vals := append([]string(nil), t.order...)
		sort.SliceStable(vals, func(i, j int) bool { return t.n[vals[i]] > t.n[vals[j]] })
		const shown = 4
		var b strings.Builder
		for i, v := range vals {
			if i == shown {
				fmt.Fprintf(&b, ", and %d more", len(vals)-shown)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s (%d %s)", orDash(v), t.n[v], plural(t.n[v], "row", "rows"))
		}
		return b.String()
	}
	who := "ran on"
	if cp && len(ranks) == 1 && world > 1 { // a CP table keeps one rank's rows of each case
		for r := range ranks {
			who = fmt.Sprintf("rank %d of %d ran on", r, world)
		}
	}
	return fmt.Sprintf("%s: host %s; %s; longca %s; env %s", who, part(host), part(card), part(version), part(env))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
