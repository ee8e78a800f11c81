package harness

import (
	"errors"
	"strings"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
)

// ErrUnsupported marks an error as "this case cannot run here" (a kernel's Supports
// refusal, a mask that cannot be laid out at this length): status unsupported. It is
// kernels.ErrUnsupported, so kernels mark their own refusals without importing harness.
var ErrUnsupported = kernels.ErrUnsupported

// ErrWrong marks a failed correctness check: status wrong.
var ErrWrong = errors.New("failed the check")

// Classify turns an error into a row status and reason: an out-of-memory error is oom,
// ErrUnsupported is unsupported, ErrWrong is wrong, anything else error; nil is ok.
func Classify(err error) (results.Status, string) {
	switch {
	case err == nil:
		return results.StatusOK, ""
	case errors.Is(err, ErrWrong):
		return results.StatusWrong, err.Error()
	case isOOM(err):
		return results.StatusOOM, err.Error()
	case errors.Is(err, ErrUnsupported):
		return results.StatusUnsupported, err.Error()
	}
	return results.StatusError, err.Error()
}

func isOOM(err error) bool {
	if errors.Is(err, kernels.ErrOOM) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "out of memory") || strings.Contains(s, "cuda_error_out_of_memory") ||
		strings.Contains(s, "cannot allocate memory")
}

// Unsupported marks err as unsupported, keeping its message.
func Unsupported(err error) error { return kernels.Unsupported(err) }
