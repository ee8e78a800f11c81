package present

import (
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// TestProvenanceLine: the report says where its measured rows ran, one value where all agree,
// each with its rows where they differ; rows not measured are left out; older files' rows say
// their env was not recorded.
func TestProvenanceLine(t *testing.T) {
	row := func(host, uuid, env string) results.Row {
		r := settingRow("cuda", 100)
		r.Host, r.Device, r.DeviceUUID, r.Version, r.Env = host, "cuda:0 NVIDIA H200", uuid, "abc1234", env
		return r
	}
	one := []results.Row{row("vm", "GPU-b7e54e17-fa9f-2588-3dec-5d42acb9c065", `{"NCCL_ALGO":"Ring"}`), row("vm", "GPU-b7e54e17-fa9f-2588-3dec-5d42acb9c065", `{"NCCL_ALGO":"Ring"}`)}
	if got, want := ProvenanceLine(one, "", false), "ran on: host vm; H200 GPU-b7e54e17; longca abc1234; env NCCL_ALGO=Ring"; got != want {
		t.Fatalf("one place:\n got %s\nwant %s", got, want)
	}
	two := append(one, row("node2", "GPU-00c0ffee-0000-0000-0000-000000000000", "{}"))
	failed := row("node3", "", "")
	failed.Status = results.StatusUnsupported
	two = append(two, failed)
	got := ProvenanceLine(two, "", false)
	for _, want := range []string{"host vm (2 rows), node2 (1 row);", "H200 GPU-b7e54e17 (2 rows), H200 GPU-00c0ffee (1 row);", "env NCCL_ALGO=Ring (2 rows), none set (1 row)"} {
		if !strings.Contains(got, want) {
			t.Fatalf("two places: %s\nlacks %s", got, want)
		}
	}
	if strings.Contains(got, "node3") {
		t.Fatalf("an unsupported row's host in %s", got)
	}
	old := row("vm", "", "")
	if got := ProvenanceLine([]results.Row{old}, "", false); got != "ran on: host vm; H200; longca abc1234; env not recorded" {
		t.Fatalf("an older file: %s", got)
	}
	// a CP table's rows: one rank's of each case, which the line says
	c := row("node0", "GPU-b7e54e17-fa9f-2588-3dec-5d42acb9c065", "{}")
	c.Bench, c.WorldSize = "cp", 8
	if got := ProvenanceLine([]results.Row{c}, "", true); !strings.HasPrefix(got, "rank 0 of 8 ran on: host node0;") {
		t.Fatalf("a CP table's line: %s", got)
	}
	if got := ProvenanceLine([]results.Row{failed}, "", false); got != "" {
		t.Fatalf("no measured row: %q", got)
	}
}
