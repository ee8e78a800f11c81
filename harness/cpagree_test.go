package harness

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
)

// A failing rank's reason travels to every rank cut to reasonBytes at a character
// boundary: cut inside a character, the agreed reason (a row's reason on every rank) was
// not valid UTF-8.
func TestAgreedReasonIsCutAtACharacter(t *testing.T) {
	long := errors.New("x" + strings.Repeat("é", reasonBytes)) // 2 bytes each, from an odd offset: past the bound
	got := make([]error, 2)
	if err := local.Run(2, func(c comm.Comm) error {
		var mine error
		if c.Rank() == 1 {
			mine = long
		}
		_, got[c.Rank()] = agree(c, 0, mine)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for r, err := range got {
		if err == nil {
			t.Fatalf("rank %d: no agreed error", r)
		}
		if msg := err.Error(); !utf8.ValidString(msg) || !strings.HasPrefix(msg, "rank 1: xéé") || len(msg) > reasonBytes {
			t.Errorf("rank %d: agreed reason of %d bytes, valid UTF-8 %v: %.40q...", r, len(msg), utf8.ValidString(msg), msg)
		}
	}
}
