//go:build nvrtc

package cuda

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/longca/longca/internal/cuda"
)

// The offline compile: NVRTC without a GPU (any libnvrtc.so.12 on the loader's path, for
// example CUDA 12.4's from Debian's nvidia-cuda-toolkit and libnvrtc12), for sm_90a with
// ptxas's verbose report, so registers, spills and ptxas's warnings about serialised wgmma
// are known before a device call:
//
//	LD_LIBRARY_PATH=/work/cuda124/root/usr/lib/x86_64-linux-gnu \
//	  go test -tags nvrtc ./kernels/cuda -run TestOfflineCompile -v -offline.variants sm90,sm90m
//
// LONGCA_OFFLINE_EXTRA="A B=2" adds trial defines to every source compiled. It reports; it asserts only that each source compiles and that the default's wgmma are not
// serialised. The timings that count are the device's.
var offlineVariants = flag.String("offline.variants", "sm90", "comma-separated variants to compile offline")

func TestOfflineCompile(t *testing.T) {
	if _, _, err := cuda.NVRTCVersion(); err != nil {
		t.Fatalf("no NVRTC (set LD_LIBRARY_PATH to a libnvrtc.so.12): %v", err)
	}
	maj, min, _ := cuda.NVRTCVersion()
	t.Logf("NVRTC %d.%d", maj, min)
	opts := []string{"-arch=sm_90a", "-std=c++17", "-default-device", "-I" + os.Getenv("LONGCA_OFFLINE_CUDA_INCLUDE"), "--use_fast_math", "-lineinfo", "-Xptxas", "-v"}
	fn := regexp.MustCompile(`Compiling entry function '(\w+)'`)
	for _, name := range strings.Split(*offlineVariants, ",") {
		var av *archVariant
		for i := range archVariants {
			if archVariants[i].name == name {
				av = &archVariants[i]
			}
		}
		if av == nil || !strings.HasPrefix(name, "sm90") {
			t.Fatalf("-offline.variants: %q is not an sm90 variant", name)
		}
		src := av.sourceSM90()
		for _, d := range strings.Fields(os.Getenv("LONGCA_OFFLINE_EXTRA")) { // trial defines, NAME or NAME=VALUE
			name, val, ok := strings.Cut(d, "=")
			if !ok {
				val = "1"
			}
			src = "#define " + name + " " + val + "\n" + src
		}
		img, log, err := cuda.Compile(src, "longca_attention_sm90.cu", opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if dir := os.Getenv("LONGCA_OFFLINE_CUBIN_DIR"); dir != "" && os.Getenv("LONGCA_OFFLINE_PTX") != "" { // the PTX beside the cubin
			popts := append([]string{"-arch=compute_90a"}, opts[1:len(opts)-2]...)
			ptx, _, err := cuda.Compile(src, "longca_attention_sm90.cu", popts)
			if err != nil {
				t.Fatalf("%s PTX: %v", name, err)
			}
			if err := os.WriteFile(dir+"/"+name+".ptx", ptx, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if dir := os.Getenv("LONGCA_OFFLINE_CUBIN_DIR"); dir != "" {
			if err := os.WriteFile(dir+"/"+name+".cubin", img, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// one line an entry: name, registers, spills, and any warning about it
		var cur string
		var rows []string
		for _, l := range strings.Split(log, "\n") {
			if m := fn.FindStringSubmatch(l); m != nil {
				cur = m[1]
				continue
			}
			l = strings.TrimSpace(strings.TrimPrefix(l, "ptxas info    : "))
			switch {
			case strings.HasPrefix(l, "Used "), strings.Contains(l, "spill"), strings.Contains(l, "warning") && !strings.Contains(l, "#128-D"), strings.Contains(l, "Performance"), strings.Contains(l, "serialized"):
				rows = append(rows, cur+": "+l)
				if name == "sm90" && strings.Contains(l, "serialized") {
					t.Errorf("the default %s: %s", cur, l)
				}
			}
		}
		t.Logf("%s (%d-byte cubin):\n%s", name, len(img), strings.Join(rows, "\n"))
	}
}
