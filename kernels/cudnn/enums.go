package cudnn

// The few cuDNN enum values longca uses, declared here so that no cuDNN header is needed
// to build. Values are those of cudnn_graph.h (cuDNN 9); an entry that came later says
// since which version.

// status is cudnnStatus_t.
type status int32

// The cudnnStatus_t categories (a status is its category plus a specific code).
const (
	statusSuccess      status = 0
	statusBadParam     status = 2000
	statusNotSupported status = 3000
	statusInternal     status = 4000
	statusExecution    status = 5000
	// statusDeviceAlloc is CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED.
	statusDeviceAlloc status = 4004
)

// category is the status's category (2000 bad parameter, 3000 not supported, ...).
func (s status) category() status { return s / 1000 * 1000 }

// descType is cudnnBackendDescriptorType_t.
type descType int32

const (
	descPointwise      descType = 0
	descEngine         descType = 2
	descEngineCfg      descType = 3
	descEngineHeur     descType = 4
	descExecutionPlan  descType = 5
	descOpPointwise    descType = 13
	descOperationGraph descType = 15
	descVariantPack    descType = 16
	descTensor         descType = 17
	descMatmul         descType = 18
	descOpMatmul       descType = 19
	descReduction      descType = 21
	descOpReduction    descType = 22
	descOpReshape      descType = 31
	descOpSDPAForward  descType = 41 // since 9.13
)

var descTypeNames = map[descType]string{
	descPointwise: "pointwise", descEngine: "engine", descEngineCfg: "engine config",
	descEngineHeur: "engine heuristics", descExecutionPlan: "execution plan",
	descOpPointwise: "pointwise operation", descOperationGraph: "operation graph",
	descVariantPack: "variant pack", descTensor: "tensor", descMatmul: "matmul",
	descOpMatmul: "matmul operation", descReduction: "reduction",
	descOpReduction: "reduction operation", descOpReshape: "reshape operation",
	descOpSDPAForward: "SDPA forward operation",
}

func (t descType) String() string {
	if n, ok := descTypeNames[t]; ok {
		return n
	}
	return "descriptor type " + itoa(int64(t))
}

// attrType is cudnnBackendAttributeType_t.
type attrType int32

const (
	typeHandle            attrType = 0
	typeDataType          attrType = 1
	typeBoolean           attrType = 2
	typeInt64             attrType = 3
	typeFloat             attrType = 4
	typeDouble            attrType = 5
	typeVoidPtr           attrType = 6
	typeHeurMode          attrType = 8
	typePointwiseMode     attrType = 14
	typeBackendDescriptor attrType = 15
	typeReductionOperator attrType = 18
	typeChar              attrType = 24
)

// attrName is cudnnBackendAttributeName_t.
type attrName int32

const (
	attrPointwiseMode     attrName = 0
	attrPointwiseMathPrec attrName = 1
	attrPointwiseAxis     attrName = 9

	attrEngineHeurMode           attrName = 200
	attrEngineHeurOperationGraph attrName = 201
	attrEngineHeurResults        attrName = 202

	attrEngineCfgEngine attrName = 300

	attrExecutionPlanHandle        attrName = 400
	attrExecutionPlanEngineConfig  attrName = 401
	attrExecutionPlanWorkspaceSize attrName = 402
	attrExecutionPlanJSON          attrName = 405

	attrOpPointwisePWDescriptor attrName = 750
	attrOpPointwiseXDesc        attrName = 751
	attrOpPointwiseBDesc        attrName = 752
	attrOpPointwiseYDesc        attrName = 753
	attrOpPointwiseAlpha1       attrName = 754
	attrOpPointwiseAlpha2       attrName = 755
	attrOpPointwiseTDesc        attrName = 758

	attrOperationGraphHandle attrName = 800
	attrOperationGraphOps    attrName = 801

	attrTensorByteAlignment attrName = 900
	attrTensorDataType      attrName = 901
	attrTensorDimensions    attrName = 902
	attrTensorStrides       attrName = 903
	attrTensorUniqueID      attrName = 906
	attrTensorIsVirtual     attrName = 907
	attrTensorIsByValue     attrName = 908
	attrTensorRaggedOffset  attrName = 913

	attrVariantPackUniqueIDs    attrName = 1000
	attrVariantPackDataPointers attrName = 1001
	attrVariantPackWorkspace    attrName = 1003

	attrEngineOperationGraph attrName = 1300
	attrEngineGlobalIndex    attrName = 1301

	attrMatmulCompType attrName = 1500

	attrOpMatmulADesc     attrName = 1520
	attrOpMatmulBDesc     attrName = 1521
	attrOpMatmulCDesc     attrName = 1522
	attrOpMatmulDesc      attrName = 1523
	attrOpMatmulMOverride attrName = 1525
	attrOpMatmulNOverride attrName = 1526
	attrOpMatmulKOverride attrName = 1527

	attrReductionOperator        attrName = 1600
	attrReductionCompType        attrName = 1601
	attrReductionIsDeterministic attrName = 1602 // since 9.11

	attrOpReductionXDesc attrName = 1610
	attrOpReductionYDesc attrName = 1611
	attrOpReductionDesc  attrName = 1612

	attrOpReshapeXDesc attrName = 2200
	attrOpReshapeYDesc attrName = 2201

	// The SDPA forward operation's attributes (since 9.13).
	attrSDPAFwdQDesc     attrName = 2800
	attrSDPAFwdKDesc     attrName = 2801
	attrSDPAFwdVDesc     attrName = 2802
	attrSDPAFwdODesc     attrName = 2803
	attrSDPAFwdStatsDesc attrName = 2804
	attrSDPAFwdScaleDesc attrName = 2805
)

// dataType is cudnnDataType_t.
type dataType int32

const (
	dtFloat   dataType = 0
	dtHalf    dataType = 2
	dtInt32   dataType = 4
	dtBF16    dataType = 9
	dtInt64   dataType = 10
	dtBoolean dataType = 11
)

func (d dataType) String() string {
	switch d {
	case dtFloat:
		return "float"
	case dtHalf:
		return "half"
	case dtInt32:
		return "int32"
	case dtBF16:
		return "bf16"
	case dtInt64:
		return "int64"
	case dtBoolean:
		return "bool"
	}
	return "dtype " + itoa(int64(d))
}

// pointwiseMode is cudnnPointwiseMode_t.
type pointwiseMode int32

const (
	pwAdd          pointwiseMode = 0
	pwMul          pointwiseMode = 1
	pwDiv          pointwiseMode = 6
	pwSub          pointwiseMode = 9
	pwExp          pointwiseMode = 13
	pwLog          pointwiseMode = 15
	pwIdentity     pointwiseMode = 21
	pwCmpGT        pointwiseMode = 302
	pwCmpGE        pointwiseMode = 303
	pwCmpLT        pointwiseMode = 304
	pwLogicalAnd   pointwiseMode = 400
	pwGenIndex     pointwiseMode = 501
	pwBinarySelect pointwiseMode = 601
)

func (m pointwiseMode) String() string {
	switch m {
	case pwAdd:
		return "add"
	case pwMul:
		return "mul"
	case pwDiv:
		return "div"
	case pwSub:
		return "sub"
	case pwExp:
		return "exp"
	case pwLog:
		return "log"
	case pwIdentity:
		return "identity"
	case pwCmpGT:
		return "cmp_gt"
	case pwCmpGE:
		return "cmp_ge"
	case pwCmpLT:
		return "cmp_lt"
	case pwLogicalAnd:
		return "logical_and"
	case pwGenIndex:
		return "gen_index"
	case pwBinarySelect:
		return "binary_select"
	}
	return "pointwise mode " + itoa(int64(m))
}

// reductionOp is cudnnReduceTensorOp_t.
type reductionOp int32

const (
	reduceAdd reductionOp = 0
	reduceMax reductionOp = 3
)

// heurMode is cudnnBackendHeurMode_t.
type heurMode int32

const (
	heurModeFallback heurMode = 2
	heurModeA        heurMode = 3
)
