package jsonkeys

import (
	"strings"
	"testing"
)

func TestDuplicate(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":1,"b":2}`, ""},
		{`{"a":1,"a":2}`, "a"},
		{`{"preset":"h100-ib","intra":{"bandwidth_gbs":1,"latency_us":2},"preset":"a100-ib"}`, "preset"},
		{`{"intra":{"bandwidth_gbs":1,"bandwidth_gbs":2}}`, "intra.bandwidth_gbs"},
		{`{"x":[{"a":1},{"a":1,"b":2,"b":3}]}`, "x[].b"},
		{`{"a":{"b":1},"c":{"b":1}}`, ""}, // one key in two objects is no duplicate
		{`[1,2,{"k":1,"k":1}]`, "[].k"},
		{`not json`, ""},
		{`{"a":1,"a"`, "a"}, // (seen before the file breaks off)
		{strings.Repeat("[", 100000), ""},
	} {
		if got := Duplicate([]byte(c.in)); got != c.want {
			t.Errorf("Duplicate(%.60q) = %q, want %q", c.in, got, c.want)
		}
	}
}
