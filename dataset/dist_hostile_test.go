package dataset

import (
	"strings"
	"testing"
)

// TestParseDistDuplicateBin: a bin given twice kept its last weight without a word
// (json.Unmarshal into a map); it is refused, naming the bin.
func TestParseDistDuplicateBin(t *testing.T) {
	_, err := ParseDist("d", []byte(`{"[1,8)": 1, "[8,16)": 2, "[1,8)": 5}`))
	if err == nil || !strings.Contains(err.Error(), `bin "[1,8)" is given twice`) {
		t.Fatalf("a bin given twice: %v, want it named", err)
	}
	// Nested values and other keys do not read as duplicates; an object is still one.
	if _, err := ParseDist("d", []byte(`{"[1,8)": 1, "[8,16)": 2}`)); err != nil {
		t.Fatalf("distinct bins: %v", err)
	}
}
