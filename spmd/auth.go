package spmd

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Secret is a job's shared secret. It prints as [redacted], so that logging a World does
// not leak it.
type Secret []byte

func (Secret) String() string { return "[redacted]" }

// GoString keeps %#v from printing the bytes too.
func (Secret) GoString() string { return "spmd.Secret{[redacted]}" }

// Environment variables of the job's identity and secret (docs/cluster.md, Security).
const (
	// EnvJobID names the job explicitly; otherwise the launcher's job id is used.
	EnvJobID = "LONGCA_JOB_ID"
	// EnvToken is the job's shared secret itself; EnvTokenFile names a file holding it
	// (readable by its owner only).
	EnvToken     = "LONGCA_JOB_TOKEN"
	EnvTokenFile = "LONGCA_JOB_TOKEN_FILE"
)

// maxTokenBytes bounds a token read from a file.
const maxTokenBytes = 4096

// JobID is this process's job identity from the launcher (jobID over the environment): the
// same on every rank of one launch, "" where no launcher says.
func JobID() string { return jobID(os.Getenv) }

// jobID is this job's identity from the launcher: LONGCA_JOB_ID, else Slurm's job and
// step ids, PMIx's namespace, Open MPI's job id, torchrun's run id; "" when none says.
func jobID(getenv func(string) string) string {
	if v := getenv(EnvJobID); v != "" {
		return v
	}
	if v := getenv("SLURM_JOB_ID"); v != "" {
		if step := getenv("SLURM_STEP_ID"); step != "" {
			return "slurm:" + v + "." + step
		}
		return "slurm:" + v
	}
	for _, k := range []string{"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID"} {
		if v := getenv(k); v != "" {
			return strings.ToLower(k) + ":" + v
		}
	}
	return ""
}

// readToken reads the job's secret from LONGCA_JOB_TOKEN or the file LONGCA_JOB_TOKEN_FILE
// names (nil when neither is set). The file must be a regular file that neither group
// nor others can write, nor others read.
func readToken(getenv func(string) string) (Secret, error) {
	tok, file := getenv(EnvToken), getenv(EnvTokenFile)
	switch {
	case tok != "" && file != "":
		return nil, fmt.Errorf("spmd: both %s and %s are set: use one", EnvToken, EnvTokenFile)
	case tok != "":
		return Secret(tok), nil
	case file == "":
		return nil, nil
	}
	st, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("spmd: %s=%s: %w", EnvTokenFile, file, err)
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("spmd: %s=%s is not a regular file", EnvTokenFile, file)
	case st.Mode().Perm()&0o027 != 0:
		return nil, fmt.Errorf("spmd: %s=%s has mode %04o: others may read or change it (chmod 600 %s)", EnvTokenFile, file, st.Mode().Perm(), file)
	case st.Size() > maxTokenBytes:
		return nil, fmt.Errorf("spmd: %s=%s has %d bytes, more than a token's %d", EnvTokenFile, file, st.Size(), maxTokenBytes)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("spmd: %s: %w", EnvTokenFile, err)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) == 0 {
		return nil, fmt.Errorf("spmd: %s=%s is empty", EnvTokenFile, file)
	}
	return Secret(b), nil
}

// storeKey is the key the store's handshake proves knowledge of: derived from the job's
// secret when there is one, else from the job id alone (which keeps jobs apart but
// proves nothing to a stranger who can read the job id).
func storeKey(job string, secret Secret) []byte {
	m := hmac.New(sha256.New, append([]byte("longca-store-key\x00"), secret...))
	m.Write([]byte(job))
	return m.Sum(nil)
}

// handshakeMAC is the MAC one side of the handshake sends: over who speaks (role), both
// nonces, the job id, the rank, the world size and the launch id that side shows.
func handshakeMAC(key []byte, role string, serverNonce, clientNonce []byte, job string, rank, size int, launch []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(role))
	m.Write(serverNonce)
	m.Write(clientNonce)
	var n [16]byte
	binary.LittleEndian.PutUint64(n[:8], uint64(rank))
	binary.LittleEndian.PutUint64(n[8:], uint64(size))
	m.Write(n[:])
	var l [1]byte
	l[0] = byte(len(launch))
	m.Write(l[:])
	m.Write(launch)
	m.Write([]byte(job))
	return m.Sum(nil)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("spmd: crypto/rand: %v", err)) // never fails on Linux
	}
	return b
}

// mpiFinalize is set by the MPI backend (build tag mpi): MPI_Finalize.
var mpiFinalize func() error

var (
	mpiSecretMu   sync.Mutex
	mpiSecretDone bool
	mpiSecretVal  Secret
	mpiSecretErr  error
)

// mpiSecret is a secret rank 0 draws and MPI_Bcast gives every rank: the launcher's own
// channel, for a job that MPI started but that talks through another backend (tcp,
// nccl). MPI is finalized right after, since that backend never uses it; the secret is
// kept for the process's later bootstraps. ok is false when MPI cannot carry it (not
// built in, or not an MPI launch).
func mpiSecret(w World, timeout time.Duration) (s Secret, ok bool, err error) {
	if !w.MPI() || mpiShare == nil {
		return nil, false, nil
	}
	mpiSecretMu.Lock()
	defer mpiSecretMu.Unlock()
	if !mpiSecretDone {
		var mine []byte
		if w.Rank == 0 {
			mine = randomBytes(32)
		}
		b, err := mpiShare(mine, 32, timeout)
		if err == nil && mpiFinalize != nil {
			err = mpiFinalize()
		}
		mpiSecretDone, mpiSecretVal, mpiSecretErr = true, b, err
		if err != nil {
			mpiSecretErr = fmt.Errorf("spmd: sharing the store's secret over MPI: %w", err)
		}
	}
	return mpiSecretVal, true, mpiSecretErr
}
