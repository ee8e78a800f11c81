package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CacheDir is where compiled cubins are kept: os.UserCacheDir()/longca/nvrtc, or
// $LONGCA_CACHE_DIR when set.
func CacheDir() string {
	if d := os.Getenv("LONGCA_CACHE_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "longca", "nvrtc")
}

// CacheKey is the sha256 of everything that determines the compiled image.
func CacheKey(src string, opts []string, device string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", src, strings.Join(opts, "\x01"), device)
	if ma, mi, err := NVRTCVersion(); err == nil {
		fmt.Fprintf(h, "\x00nvrtc %d.%d", ma, mi)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CompileCached is Compile with the image kept on disk under CacheKey: a later run with
// the same source, options, device and NVRTC loads it instead of compiling. It reports
// whether the cache answered. A cache that cannot be written is not an error.
func CompileCached(src, name string, opts []string, device string) (image []byte, log string, hit bool, err error) {
	path := filepath.Join(CacheDir(), CacheKey(src, opts, device)+".cubin")
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		return b, "", true, nil
	}
	image, log, err = Compile(src, name, opts)
	if err != nil {
		return nil, log, false, err
	}
	if os.MkdirAll(filepath.Dir(path), 0o755) == nil {
		tmp := path + fmt.Sprintf(".%d.tmp", os.Getpid())
		if os.WriteFile(tmp, image, 0o644) == nil {
			_ = os.Rename(tmp, path)
		}
	}
	return image, log, false, nil
}

// Options are the NVRTC options longca compiles with for this device.
func (g *Device) Options(extra ...string) []string {
	opts := []string{"-arch=" + g.Arch(), "-std=c++17", "-default-device", "-I/usr/local/cuda/include",
		"-I/usr/local/cuda/targets/x86_64-linux/include"}
	return append(opts, extra...)
}

// LoadSource compiles (or loads from the cache) src for this device and loads it.
func (g *Device) LoadSource(src, name string, extra ...string) (*Module, error) {
	img, log, _, err := CompileCached(src, name, g.Options(extra...), g.Props.Name+" "+g.Arch())
	if err != nil {
		return nil, err
	}
	_ = log
	var m *Module
	err = g.with(func() error {
		var err error
		m, err = LoadModule(img)
		return err
	})
	return m, err
}
