package cuda

import (
	"strings"
	"testing"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// The argument check refuses a tensor that is not in device memory, naming the argument.
func TestArgsNameTheHostArgument(t *testing.T) {
	h := tensor.NewHost(tensor.BF16, 4, 2, 8)
	_, err := kernels.DeviceArgs[*cuda.Buffer]("cuda", kernels.Want("dout", h, tensor.BF16, []int{4, 2, 8}))
	if err == nil || !strings.Contains(err.Error(), "dout") || !strings.Contains(err.Error(), "not a device tensor") {
		t.Fatalf("error %v, want one naming dout as not a device tensor", err)
	}
	if bs, err := kernels.DeviceArgs[*cuda.Buffer]("cuda"); err != nil || len(bs) != 0 {
		t.Fatalf("no arguments: %v, %v", bs, err)
	}
}
