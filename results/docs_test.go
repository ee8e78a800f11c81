package results

import (
	"os"
	"strings"
	"testing"
)

// TestEveryColumnIsDocumented keeps docs/results-format.md and the schema in step.
func TestEveryColumnIsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/results-format.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, c := range Columns() {
		if !strings.Contains(doc, "| `"+c+"` |") {
			t.Errorf("column %s has no row in docs/results-format.md", c)
		}
	}
	for _, k := range []string{MetaSchemaVersion, MetaRuns, MetaAllowMissing, MetaMissing, MetaTruncated, MetaPlannedRows, MetaIncomplete} {
		if !strings.Contains(doc, "`"+k+"`") {
			t.Errorf("metadata key %s is not documented", k)
		}
	}
}
