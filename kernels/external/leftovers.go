package external

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"syscall"
)

// TagEnv names the variable longca adds to a worker's environment: a random tag of that
// worker, inherited by whatever it starts. A process the worker started in a session of
// its own (setsid, start_new_session=True) is beyond the process group's kill; stop finds
// it by the tag in /proc/PID/environ and kills it. A descendant that clears its
// environment, or one still running when longca itself is killed, escapes it.
const TagEnv = "LONGCA_WORKER_TAG"

// newTag is a fresh random tag (16 hex digits).
func newTag() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return ""
	}
	return hex.EncodeToString(b[:])
}

// procRoot is where processes are listed (a test may point it elsewhere).
var procRoot = "/proc"

// maxEnviron bounds how much of a process's environment is read (Linux holds it within
// the argument limit, a few MB at most).
const maxEnviron = 8 << 20

// killTagged kills every process but this one whose environment holds TagEnv=tag, in up
// to three passes (one may start another while the first is read), and says how many it
// killed. A process killed in one pass may still be seen exiting in the next: it is not
// counted again, and a pass that finds no new one ends the sweep. Processes it may not
// read are skipped.
func killTagged(tag string) int {
	if tag == "" {
		return 0
	}
	entry := []byte(TagEnv + "=" + tag)
	self := os.Getpid()
	killed := map[int]bool{}
	for pass := 0; pass < 3; pass++ {
		n := 0
		for _, pid := range tagged(entry, self) {
			if !killed[pid] && syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid] = true
				n++
			}
		}
		if n == 0 {
			break
		}
	}
	return len(killed)
}

// tagged lists the processes other than self whose environment holds entry whole.
func tagged(entry []byte, self int) []int {
	d, err := os.Open(procRoot)
	if err != nil {
		return nil
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil
	}
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		if hasEntry(readEnviron(procRoot+"/"+name+"/environ"), entry) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func readEnviron(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxEnviron)) // what was read, where it fails
	return b
}

// hasEntry says whether the NUL-separated environment env holds entry as a whole entry.
func hasEntry(env, entry []byte) bool {
	for len(env) > 0 {
		i := bytes.IndexByte(env, 0)
		if i < 0 {
			return bytes.Equal(env, entry)
		}
		if bytes.Equal(env[:i], entry) {
			return true
		}
		env = env[i+1:]
	}
	return false
}
