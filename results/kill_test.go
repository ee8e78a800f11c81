package results

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Environment of the writer child process (the test binary re-executed).
const (
	envChild = "LONGCA_RESULTS_CHILD"
	envDir   = "LONGCA_RESULTS_DIR"
	envRank  = "LONGCA_RESULTS_RANK"
	envRows  = "LONGCA_RESULTS_ROWS" // rows to write then close; 0 = forever
)

// TestWriterChild is the child's body; it does nothing in a normal test run.
func TestWriterChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		return
	}
	rank, _ := strconv.Atoi(os.Getenv(envRank))
	rows, _ := strconv.Atoi(os.Getenv(envRows))
	w, err := Create(os.Getenv(envDir), "killrun", rank, 4)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	rng := rand.New(rand.NewPCG(uint64(rank), 9))
	for i := 0; rows == 0 || i < rows; i++ {
		r := randomRow(rng, i)
		r.Rank = int64(rank)
		if err := w.Write(r); err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		fmt.Println("wrote", i+1) // the row is on disk: tell the parent
		if rows == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if err := w.Close(); err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	os.Exit(0)
}

func startWriter(t *testing.T, dir string, rank, rows int) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriterChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=1", envDir+"="+dir,
		envRank+"="+strconv.Itoa(rank), envRows+"="+strconv.Itoa(rows))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out)
}

// TestKilledWriterKeepsFinishedRows starts four writer processes (ranks of one run),
// SIGKILLs rank 1 mid-run, and reads back every row each one said it finished; the merge
// of the four files then holds them all and names rank 1 as truncated.
func TestKilledWriterKeepsFinishedRows(t *testing.T) {
	dir := t.TempDir()
	const fixed = 6
	finished := map[int]int{}
	for _, rank := range []int{0, 2, 3} {
		cmd, sc := startWriter(t, dir, rank, fixed)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "wrote "); ok {
				finished[rank], _ = strconv.Atoi(n)
			} else {
				t.Errorf("rank %d: %s", rank, sc.Text())
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
	}

	killAfter := 5 + rand.New(rand.NewPCG(7, 7)).IntN(20)
	cmd, sc := startWriter(t, dir, 1, 0)
	for sc.Scan() {
		n, ok := strings.CutPrefix(sc.Text(), "wrote ")
		if !ok {
			t.Fatalf("rank 1: %s", sc.Text())
		}
		finished[1], _ = strconv.Atoi(n)
		if finished[1] >= killAfter {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("writer was not killed by SIGKILL: %v", err)
	}

	f, err := Open(dir + "/" + FileName("killrun", 1, 4))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := f.Rows()
	f.Release()
	if err != nil {
		t.Fatal(err)
	}
	if !f.Truncated {
		t.Error("killed writer's file does not read as truncated")
	}
	if len(rows) < finished[1] {
		t.Fatalf("killed writer finished %d rows, %d read back", finished[1], len(rows))
	}
	// Rows are whole and in order: the same random rows the child made.
	rng := rand.New(rand.NewPCG(1, 9))
	for i, r := range rows {
		want := randomRow(rng, i)
		want.Rank = 1
		if r.Sample != int64(i) || r.Seed != want.Seed || r.FLOPs != want.FLOPs || r.Rank != 1 {
			t.Fatalf("row %d of the killed writer reads back as sample %d seed %d", i, r.Sample, r.Seed)
		}
	}
	t.Logf("killed after %d finished rows; %d read back", finished[1], len(rows))

	res, err := Merge(dir, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(3*fixed + len(rows))
	if res.Rows != want || len(res.Truncated) != 1 || !strings.Contains(res.Truncated[0], "rank 1 of 4") {
		t.Fatalf("merge: %d rows (want %d), truncated %v", res.Rows, want, res.Truncated)
	}
	m, err := Open(res.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	if m.NumRows() != want || !strings.Contains(m.Meta(MetaTruncated), "rank 1") {
		t.Fatalf("merged file: %d rows, truncated %q", m.NumRows(), m.Meta(MetaTruncated))
	}
}
