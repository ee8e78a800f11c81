package cudnn

/*
#include <stddef.h>
static size_t cudnn_probe_version(void* f) { return ((size_t (*)(void))f)(); }
*/
import "C"

import "github.com/longca/longca/internal/dl"

// Probe says whether cuDNN opens here from DefaultLibraries, and its version
// (cudnnGetVersion), as `longca env` and `longca list` print it.
func Probe() dl.Probe { return probe(DefaultLibraries...) }

func probe(names ...string) dl.Probe {
	return dl.ProbeOpen("libcudnn", names, func(l *dl.Library) (string, error) {
		f, err := l.Sym("cudnnGetVersion")
		if err != nil {
			return "", err
		}
		return VersionString(int(C.cudnn_probe_version(f))), nil
	})
}
