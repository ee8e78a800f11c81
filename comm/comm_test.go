package comm

import (
	"strings"
	"testing"

	"github.com/longca/longca/tensor"
)

type notHost struct{ tensor.Tensor }

func TestHostPair(t *testing.T) {
	a, b := tensor.NewHost(tensor.FP32, 4), tensor.NewHost(tensor.FP32, 8)
	if ha, hb, err := HostPair(a, b); err != nil || ha != a || hb != b {
		t.Fatalf("two fp32 host tensors: %v", err)
	}
	for _, c := range []struct {
		a, b tensor.Tensor
		want string
	}{
		{a, tensor.NewHost(tensor.BF16, 4), "dtypes fp32 and bf16 differ"},
		{notHost{a}, b, "not in host memory"},
		{a, notHost{b}, "not in host memory"},
	} {
		if _, _, err := HostPair(c.a, c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}
