package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"abc", -1, ""},
		{"aé", 2, "a"},   // é is 2 bytes: not cut inside it
		{"a€b", 3, "a"},  // € is 3 bytes
		{"a€b", 4, "a€"}, //
		{"😀x", 3, ""},    // 4 bytes: nothing before it fits
		{"a\x80\x80\x80\x80\x80", 4, "a\x80\x80\x80"}, // invalid bytes: cut where asked
	} {
		if got := Prefix(c.s, c.n); got != c.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	// every cut of valid text is valid and at most n bytes
	s := strings.Repeat("aé€😀", 10)
	for n := 0; n <= len(s); n++ {
		p := Prefix(s, n)
		if len(p) > n || !utf8.ValidString(p) || !strings.HasPrefix(s, p) || n-len(p) >= utf8.UTFMax {
			t.Errorf("Prefix(s, %d) = %q", n, p)
		}
	}
}
