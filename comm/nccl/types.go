package nccl

import (
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// DataType is NCCL's ncclDataType_t.
type DataType int32

// The ncclDataType_t values of nccl.h (2.x).
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	Bfloat16 DataType = 9
)

// RedOp is NCCL's ncclRedOp_t.
type RedOp int32

// The built-in ncclRedOp_t values of nccl.h (2.x).
const (
	OpSum  RedOp = 0
	OpProd RedOp = 1
	OpMax  RedOp = 2
	OpMin  RedOp = 3
	OpAvg  RedOp = 4
)

// DataTypeOf maps a longca element type to NCCL's.
func DataTypeOf(d tensor.DType) (DataType, error) {
	switch d {
	case tensor.BF16:
		return Bfloat16, nil
	case tensor.FP16:
		return Float16, nil
	case tensor.FP32:
		return Float32, nil
	case tensor.FP64:
		return Float64, nil
	}
	return 0, fmt.Errorf("nccl: no NCCL type for %v", d)
}

// RedOpOf maps a longca reduction to NCCL's.
func RedOpOf(o comm.Op) (RedOp, error) {
	switch o {
	case comm.Sum:
		return OpSum, nil
	case comm.Max:
		return OpMax, nil
	}
	return 0, fmt.Errorf("nccl: no NCCL reduction for op %d", uint8(o))
}
