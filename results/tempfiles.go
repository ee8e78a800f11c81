package results

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/longca/longca/internal/smallfile"
)

// A merged or exported file is written to a temporary file beside it (".<name>.tmp-N",
// smallfile.Replace) and renamed over its name. A merge killed with SIGKILL (a batch
// system's time limit past its grace) cannot remove that file: it stayed, hidden, through
// every later merge (3.6 MB for a small sweep). So writeVia holds a lock (flock) on its
// temporary file from just after it is made until it is renamed or removed, and a merge
// removes, before it writes, the temporary files of the names it writes that no process
// holds locked (the lock of a killed process is gone with it) and that are older than
// tempGrace (a file made an instant ago may not be locked yet). Where the file system has
// no flock (some network file systems), only files untouched for tempUnlockedAge are
// removed: a live writer's file is written to all along.

// tempGrace is how old an unlocked temporary file must be to be removed; tempUnlockedAge
// how old one must be where it cannot be locked at all. (Variables: tests age files with
// Chtimes, never wait.)
var (
	tempGrace       = time.Minute
	tempUnlockedAge = time.Hour
)

// lockTemp opens the temporary file tmp again and takes an exclusive flock on it, held
// until the returned file is closed (after the rename: a lock on the descriptor Replace
// closes would end before it); nil where it cannot be locked (that file is then judged by
// its age alone).
func lockTemp(tmp string) *os.File {
	f, err := os.Open(tmp)
	if err != nil {
		return nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil
	}
	return f
}

// isTempOf says whether name is a temporary file smallfile.Replace makes for base:
// smallfile.TempPrefix(base) (".<base>.tmp-", a name over 239 bytes cut) and the digits
// os.CreateTemp puts for its '*'.
func isTempOf(name, base string) bool {
	rest, ok := strings.CutPrefix(name, smallfile.TempPrefix(base))
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// mergeProbe is the prefix of checkOut's probe file (made and removed at once).
const mergeProbe = ".longca-merge-probe-"

// removeStaleTemps removes, in the folder of paths (one folder), the temporary files of
// their names that their writer left: killed before it could (see above). It also removes
// checkOut's probe files older than tempGrace. It returns the paths removed; a file it
// cannot judge or remove is left as it is (the write goes on: a stray file is no reason
// to fail a merge).
func removeStaleTemps(paths ...string) []string {
	if len(paths) == 0 {
		return nil
	}
	dir := filepath.Dir(paths[0])
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	now := time.Now()
	var removed []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ".") || !e.Type().IsRegular() {
			continue
		}
		probe := strings.HasPrefix(name, mergeProbe)
		ours := probe
		for _, p := range paths {
			ours = ours || isTempOf(name, filepath.Base(p))
		}
		if !ours {
			continue
		}
		p := filepath.Join(dir, name)
		if staleTemp(p, now, probe) && os.Remove(p) == nil {
			removed = append(removed, p)
		}
	}
	return removed
}

// staleTemp says whether the temporary file p was left by a writer that is gone: older
// than tempGrace and locked by no one, or (where it cannot be locked) older than
// tempUnlockedAge. A probe file (never locked: it lives an instant) needs only to be older
// than tempGrace.
func staleTemp(p string, now time.Time, probe bool) bool {
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || now.Sub(st.ModTime()) < tempGrace {
		return false
	}
	if probe {
		return true
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close() // (and with it the lock taken here)
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return true
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false // a live writer holds it
	}
	return now.Sub(st.ModTime()) >= tempUnlockedAge // no flock here: by its age alone
}
