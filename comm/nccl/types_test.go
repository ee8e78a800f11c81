package nccl

import (
	"testing"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// ncclSize is the element size of each NCCL type, from nccl.h's list.
var ncclSize = map[DataType]int{Int8: 1, Uint8: 1, Int32: 4, Uint32: 4, Int64: 8, Uint64: 8, Float16: 2, Float32: 4, Float64: 8, Bfloat16: 2}

func TestDataTypeOf(t *testing.T) {
	cases := []struct {
		d    tensor.DType
		want DataType
		code int32 // the value nccl.h gives it
	}{
		{tensor.BF16, Bfloat16, 9},
		{tensor.FP16, Float16, 6},
		{tensor.FP32, Float32, 7},
		{tensor.FP64, Float64, 8},
	}
	seen := map[DataType]bool{}
	for _, c := range cases {
		got, err := DataTypeOf(c.d)
		if err != nil {
			t.Fatalf("DataTypeOf(%v): %v", c.d, err)
		}
		if got != c.want || int32(got) != c.code {
			t.Errorf("DataTypeOf(%v) = %d, want %d", c.d, got, c.code)
		}
		if ncclSize[got] != c.d.Size() {
			t.Errorf("%v is %d bytes but NCCL type %d is %d", c.d, c.d.Size(), got, ncclSize[got])
		}
		if seen[got] {
			t.Errorf("two dtypes map to NCCL type %d", got)
		}
		seen[got] = true
	}
	for _, bad := range []tensor.DType{0, tensor.FP64 + 1, 200} {
		if _, err := DataTypeOf(bad); err == nil {
			t.Errorf("DataTypeOf(%v) gave no error", bad)
		}
	}
}

func TestRedOpOf(t *testing.T) {
	cases := []struct {
		o    comm.Op
		want int32
	}{{comm.Sum, 0}, {comm.Max, 2}}
	for _, c := range cases {
		got, err := RedOpOf(c.o)
		if err != nil || int32(got) != c.want {
			t.Errorf("RedOpOf(%v) = %d, %v; want %d", c.o, got, err, c.want)
		}
	}
	if _, err := RedOpOf(comm.Max + 1); err == nil {
		t.Error("RedOpOf of an unknown op gave no error")
	}
	if OpProd != 1 || OpMin != 3 || OpAvg != 4 {
		t.Error("ncclRedOp_t values differ from nccl.h")
	}
}
