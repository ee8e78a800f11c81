package spmd

import (
	"fmt"
	"strconv"
	"strings"
)

// ExpandNodeList expands a Slurm host list such as "gpu[01-03,07],login1" into its
// hosts, in order, keeping zero padding ("gpu01", "gpu02", "gpu03", "gpu07", "login1").
// Several bracket groups in one name ("r[1-2]n[1-2]") expand as a product. A list of more
// than MaxWorld hosts (a job has no more ranks than that) is refused before it is expanded:
// "n[0-65535][0-65535]" would be 2^32 names.
func ExpandNodeList(s string) ([]string, error) {
	var hosts []string
	for _, item := range splitTop(s) {
		if item == "" {
			continue
		}
		hs, err := expandOne(item, MaxWorld-len(hosts))
		if err != nil {
			return nil, err
		}
		if hosts = append(hosts, hs...); len(hosts) > MaxWorld {
			return nil, fmt.Errorf("node list names more than the %d hosts a job may have", MaxWorld)
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("node list %q names no host", s)
	}
	return hosts, nil
}

// splitTop splits on the commas outside brackets.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// expandOne expands the first bracket group of one name and recurses on the rest, into at
// most room names.
func expandOne(name string, room int) ([]string, error) {
	open := strings.IndexByte(name, '[')
	if open < 0 {
		if strings.ContainsRune(name, ']') {
			return nil, fmt.Errorf("node list entry %q has ']' without '['", name)
		}
		return []string{name}, nil
	}
	end := strings.IndexByte(name[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("node list entry %q has '[' without ']'", name)
	}
	end += open
	prefix, body, rest := name[:open], name[open+1:end], name[end+1:]
	tails, err := expandOne(rest, room)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		ids, err := expandRange(r)
		if err != nil {
			return nil, fmt.Errorf("node list entry %q: %w", name, err)
		}
		if len(ids) > (room-len(out))/max(len(tails), 1) {
			return nil, fmt.Errorf("node list entry %q names more than the %d hosts a job may have", name, MaxWorld)
		}
		for _, id := range ids {
			for _, t := range tails {
				out = append(out, prefix+id+t)
			}
		}
	}
	return out, nil
}

// expandRange expands "01-03" to 01, 02, 03 (width from the first bound) or "7" to 7.
func expandRange(r string) ([]string, error) {
	lo, hi, isRange := strings.Cut(r, "-")
	a, err := strconv.Atoi(lo)
	if err != nil || lo == "" {
		return nil, fmt.Errorf("%q is not a number or a range", r)
	}
	if !isRange {
		return []string{lo}, nil
	}
	b, err := strconv.Atoi(hi)
	if err != nil {
		return nil, fmt.Errorf("%q is not a number range", r)
	}
	if b < a {
		return nil, fmt.Errorf("range %q runs backwards", r)
	}
	if b-a >= MaxWorld { // (the list as a whole is bounded by MaxWorld too: ExpandNodeList)
		return nil, fmt.Errorf("range %q names more than the %d hosts a job may have", r, MaxWorld)
	}
	out := make([]string, 0, b-a+1)
	for i := a; i <= b; i++ {
		out = append(out, fmt.Sprintf("%0*d", len(lo), i))
	}
	return out, nil
}

// TasksOnNode reads Slurm's per-node task counts ("2(x3),1": three nodes of 2, then one
// of 1) and returns the count of node (0-based, SLURM_NODEID).
func TasksOnNode(spec string, node int) (int, error) {
	i := 0
	for _, part := range strings.Split(spec, ",") {
		count, rep := part, "1"
		if open := strings.IndexByte(part, '('); open >= 0 {
			if !strings.HasPrefix(part[open:], "(x") || !strings.HasSuffix(part, ")") {
				return 0, fmt.Errorf("%q is not a count or count(xN)", part)
			}
			count, rep = part[:open], part[open+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || c < 1 || r < 1 {
			return 0, fmt.Errorf("%q is not a count or count(xN)", part)
		}
		if node < i+r {
			return c, nil
		}
		i += r
	}
	return 0, fmt.Errorf("%q lists %d nodes, and this is node %d", spec, i, node)
}
