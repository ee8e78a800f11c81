package nccl

import "github.com/longca/longca/internal/dl"

// Probe says whether NCCL (libnccl.so.2) opens here with the symbols longca needs, and
// its version (ncclGetVersion), as `longca env` and `longca list` print it.
func Probe() dl.Probe { return probe(DefaultLibrary) }

func probe(names ...string) dl.Probe {
	return dl.ProbeOpen("libnccl", names, func(l *dl.Library) (string, error) {
		lib, err := resolve(l)
		if err != nil {
			return "", err
		}
		return lib.VersionString(), nil
	})
}
