// A fake libcudnn.so.9 for the CPU tests of kernels/cudnn: the backend API's descriptors
// with their attributes kept as set, finalize checks of what each descriptor type needs
// (tensors, pointwise/matmul/reduction/reshape/SDPA operations and their shapes, the
// operation graph, heuristics, plans, variant packs), and executes that check the variant
// pack against the plan's graph and compute nothing. The tests read every descriptor
// through fake_cudnn_dump(). Faults come from the environment:
//   FAKE_CUDNN_VERSION=<n>         cudnnGetVersion (default 91400)
//   FAKE_CUDNN_ENGINES=<n>         configurations the heuristics return (default 2)
//   FAKE_CUDNN_REFUSE=<type>       finalize of that descriptor type fails (status 3000)
//   FAKE_CUDNN_REFUSE_PLANS=<n>    the first n execution plans of each graph fail (3000)
//   FAKE_CUDNN_EXECUTE_STATUS=<s>  cudnnBackendExecute returns s
//   FAKE_CUDNN_WORKSPACE=<bytes>   the plans' workspace (default 4096)
// Built without -DWITH_LAST_ERROR it lacks cudnnGetLastErrorString, as a library that
// cannot explain itself.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OK = 0, BAD_PARAM = 2000, BAD_TYPE = 2010, NOT_FINALIZED = 2004, NOT_SUPPORTED = 3000, EXEC_FAILED = 5000 };
enum { T_POINTWISE = 0, T_ENGINE = 2, T_ENGINECFG = 3, T_HEUR = 4, T_PLAN = 5, T_OP_POINTWISE = 13, T_GRAPH = 15,
       T_PACK = 16, T_TENSOR = 17, T_MATMUL = 18, T_OP_MATMUL = 19, T_REDUCTION = 21, T_OP_REDUCTION = 22,
       T_OP_RESHAPE = 31, T_OP_SDPA_FWD = 41 };
enum { Y_HANDLE = 0, Y_DATA_TYPE = 1, Y_BOOLEAN = 2, Y_INT64 = 3, Y_FLOAT = 4, Y_DOUBLE = 5, Y_VOID_PTR = 6,
       Y_HEUR_MODE = 8, Y_POINTWISE_MODE = 14, Y_DESC = 15, Y_REDUCTION_OP = 18, Y_CHAR = 24 };

#define MAXA 48
typedef struct attr { int name, type; int64_t n; unsigned char* v; } attr;
typedef struct desc {
	int id, type, finalized;
	int nattr;
	attr a[MAXA];
	int64_t engine;     // an engine config's or engine's global index, -1 when unset
	struct desc* graph; // an engine config's operation graph
	struct desc* next;
} desc;

int fake_live = 0;     // descriptors not destroyed
int fake_executes = 0; // successful executes
static desc* all = NULL;
static int ids = 0;
static int plansTried = 0;
static char dump[1 << 22];
static __thread char lastErr[512];

static int fail(int st, const char* fmt, const char* what, long long x) {
	snprintf(lastErr, sizeof lastErr, fmt, what, x);
	return st;
}

static int envInt(const char* name, int def) {
	const char* s = getenv(name);
	return s && *s ? atoi(s) : def;
}

size_t cudnnGetVersion(void) { return (size_t)envInt("FAKE_CUDNN_VERSION", 91400); }

const char* cudnnGetErrorString(int st) {
	switch (st) {
	case OK: return "CUDNN_STATUS_SUCCESS";
	case BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
	case NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
	case BAD_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
	case NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
	case 4004: return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
	case EXEC_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
	}
	return "CUDNN_STATUS_UNKNOWN";
}

#ifdef WITH_LAST_ERROR
void cudnnGetLastErrorString(char* buf, size_t n) {
	snprintf(buf, n, "%s", lastErr);
	lastErr[0] = 0;
}
#endif

int cudnnCreate(void** h) { *h = malloc(16); return OK; }
int cudnnDestroy(void* h) { free(h); return OK; }
int cudnnSetStream(void* h, void* s) { (void)h; (void)s; return OK; }

int cudnnBackendCreateDescriptor(int type, void** out) {
	desc* d = calloc(1, sizeof *d);
	d->id = ++ids;
	d->type = type;
	d->engine = -1;
	d->next = all;
	all = d;
	fake_live++;
	*out = d;
	return OK;
}

int cudnnBackendDestroyDescriptor(void* p) {
	desc* d = p;
	for (desc** x = &all; *x; x = &(*x)->next) {
		if (*x == d) {
			*x = d->next;
			break;
		}
	}
	for (int i = 0; i < d->nattr; i++) free(d->a[i].v);
	free(d);
	fake_live--;
	return OK;
}

static size_t elemSize(int type) {
	switch (type) {
	case Y_BOOLEAN: case Y_CHAR: return 1;
	case Y_HANDLE: case Y_INT64: case Y_DOUBLE: case Y_VOID_PTR: case Y_DESC: return 8;
	}
	return 4;
}

// attrSpec says which descriptor type an attribute belongs to and its value type.
typedef struct { int name, desc, type; } attrSpec;
static const attrSpec specs[] = {
	{0, T_POINTWISE, Y_POINTWISE_MODE}, {1, T_POINTWISE, Y_DATA_TYPE}, {9, T_POINTWISE, Y_INT64},
	{200, T_HEUR, Y_HEUR_MODE}, {201, T_HEUR, Y_DESC},
	{400, T_PLAN, Y_HANDLE}, {401, T_PLAN, Y_DESC},
	{750, T_OP_POINTWISE, Y_DESC}, {751, T_OP_POINTWISE, Y_DESC}, {752, T_OP_POINTWISE, Y_DESC},
	{753, T_OP_POINTWISE, Y_DESC}, {754, T_OP_POINTWISE, Y_FLOAT}, {755, T_OP_POINTWISE, Y_FLOAT},
	{758, T_OP_POINTWISE, Y_DESC},
	{800, T_GRAPH, Y_HANDLE}, {801, T_GRAPH, Y_DESC},
	{900, T_TENSOR, Y_INT64}, {901, T_TENSOR, Y_DATA_TYPE}, {902, T_TENSOR, Y_INT64}, {903, T_TENSOR, Y_INT64},
	{906, T_TENSOR, Y_INT64}, {907, T_TENSOR, Y_BOOLEAN}, {908, T_TENSOR, Y_BOOLEAN}, {913, T_TENSOR, Y_DESC},
	{1000, T_PACK, Y_INT64}, {1001, T_PACK, Y_VOID_PTR}, {1003, T_PACK, Y_VOID_PTR},
	{1500, T_MATMUL, Y_DATA_TYPE},
	{1520, T_OP_MATMUL, Y_DESC}, {1521, T_OP_MATMUL, Y_DESC}, {1522, T_OP_MATMUL, Y_DESC}, {1523, T_OP_MATMUL, Y_DESC},
	{1525, T_OP_MATMUL, Y_DESC}, {1526, T_OP_MATMUL, Y_DESC}, {1527, T_OP_MATMUL, Y_DESC},
	{1600, T_REDUCTION, Y_REDUCTION_OP}, {1601, T_REDUCTION, Y_DATA_TYPE}, {1602, T_REDUCTION, Y_BOOLEAN},
	{1610, T_OP_REDUCTION, Y_DESC}, {1611, T_OP_REDUCTION, Y_DESC}, {1612, T_OP_REDUCTION, Y_DESC},
	{2200, T_OP_RESHAPE, Y_DESC}, {2201, T_OP_RESHAPE, Y_DESC},
	{2800, T_OP_SDPA_FWD, Y_DESC}, {2801, T_OP_SDPA_FWD, Y_DESC}, {2802, T_OP_SDPA_FWD, Y_DESC},
	{2803, T_OP_SDPA_FWD, Y_DESC}, {2804, T_OP_SDPA_FWD, Y_DESC}, {2805, T_OP_SDPA_FWD, Y_DESC},
};

int cudnnBackendSetAttribute(void* p, int name, int type, int64_t n, const void* v) {
	desc* d = p;
	if (d->finalized) return fail(BAD_PARAM, "fake: %s: descriptor already finalized (attribute %lld)", "set", name);
	const attrSpec* s = NULL;
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
		if (specs[i].name == name) s = &specs[i];
	if (!s || s->desc != d->type) return fail(BAD_PARAM, "fake: %s: attribute %lld is not one of this descriptor type", "set", name);
	if (s->type != type) return fail(BAD_TYPE, "fake: %s: wrong value type for attribute %lld", "set", name);
	if (n <= 0 || !v) return fail(BAD_PARAM, "fake: %s: no values for attribute %lld", "set", name);
	if (type == Y_VOID_PTR && name == 1003 && n != 1) return fail(BAD_PARAM, "fake: %s: %lld workspaces", "set", n);
	attr* a = NULL;
	for (int i = 0; i < d->nattr; i++)
		if (d->a[i].name == name) a = &d->a[i];
	if (!a) {
		if (d->nattr == MAXA) return fail(BAD_PARAM, "fake: %s: too many attributes (%lld)", "set", MAXA);
		a = &d->a[d->nattr++];
	} else {
		free(a->v);
	}
	a->name = name;
	a->type = type;
	a->n = n;
	a->v = malloc(n * elemSize(type));
	memcpy(a->v, v, n * elemSize(type));
	return OK;
}

static attr* get(desc* d, int name) {
	for (int i = 0; i < d->nattr; i++)
		if (d->a[i].name == name) return &d->a[i];
	return NULL;
}

static desc* descAttr(desc* d, int name, int i) {
	attr* a = get(d, name);
	return a && i < a->n ? ((desc**)a->v)[i] : NULL;
}

static int64_t* ints(desc* d, int name, int64_t* n) {
	attr* a = get(d, name);
	*n = a ? a->n : 0;
	return a ? (int64_t*)a->v : NULL;
}

static int i32(desc* d, int name) {
	attr* a = get(d, name);
	return a ? *(int*)a->v : -1;
}

// require checks that an attribute naming a finalized descriptor of a type is there.
static int require(desc* d, int name, int type, const char* what) {
	desc* x = descAttr(d, name, 0);
	if (!x) return fail(BAD_PARAM, "fake: %s lacks attribute %lld", what, name);
	if (x->type != type) return fail(BAD_PARAM, "fake: %s: attribute %lld names a descriptor of the wrong type", what, name);
	if (!x->finalized) return fail(NOT_FINALIZED, "fake: %s: attribute %lld names a descriptor not finalized", what, name);
	return OK;
}

static int ndims(desc* t, int64_t** dims) {
	int64_t n;
	*dims = ints(t, 902, &n);
	return (int)n;
}

// pointwise port counts: unary modes have x and y, select has x, b, t and y.
static int ports(int mode) {
	switch (mode) {
	case 13: case 15: case 21: case 501: return 2;
	case 601: return 4;
	}
	return 3;
}

static int checkMatmul(desc* d) {
	int64_t *a, *b, *c;
	int na = ndims(descAttr(d, 1520, 0), &a), nb = ndims(descAttr(d, 1521, 0), &b), nc = ndims(descAttr(d, 1522, 0), &c);
	if (na != nb || nb != nc || na < 2) return fail(BAD_PARAM, "fake: %s: operands of ranks that differ (%lld)", "matmul", na);
	int m = na - 2;
	if (a[m + 1] != b[m]) return fail(BAD_PARAM, "fake: %s: A's K and B's K differ (%lld)", "matmul", a[m + 1]);
	if (a[m] != c[m] || b[m + 1] != c[m + 1]) return fail(BAD_PARAM, "fake: %s: C is not M x N (%lld)", "matmul", c[m]);
	for (int i = 0; i < m; i++)
		if (c[i] % a[i] != 0 || c[i] % b[i] != 0)
			return fail(BAD_PARAM, "fake: %s: batch dims do not broadcast (axis %lld)", "matmul", i);
	return OK;
}

int cudnnBackendFinalize(void* p) {
	desc* d = p;
	if (d->finalized) return fail(BAD_PARAM, "fake: %s: descriptor %lld finalized twice", "finalize", d->id);
	if (d->type == envInt("FAKE_CUDNN_REFUSE", -1))
		return fail(NOT_SUPPORTED, "fake: %s refused (FAKE_CUDNN_REFUSE=%lld)", "finalize", d->type);
	int64_t n, n2, *x;
	int st;
	switch (d->type) {
	case T_TENSOR:
		if (!get(d, 901) || !get(d, 906) || !get(d, 900)) return fail(BAD_PARAM, "fake: %s lacks type, uid or alignment (%lld)", "tensor", d->id);
		ints(d, 902, &n);
		ints(d, 903, &n2);
		if (n == 0 || n != n2) return fail(BAD_PARAM, "fake: %s: %lld dims and a different number of strides", "tensor", n);
		x = ints(d, 902, &n);
		for (int i = 0; i < n; i++)
			if (x[i] <= 0) return fail(BAD_PARAM, "fake: %s: dim %lld not positive", "tensor", i);
		if (get(d, 913) && (st = require(d, 913, T_TENSOR, "ragged tensor"))) return st;
		break;
	case T_POINTWISE:
		if (!get(d, 0) || !get(d, 1)) return fail(BAD_PARAM, "fake: %s lacks mode or precision (%lld)", "pointwise", d->id);
		if (i32(d, 0) == 501 && !get(d, 9)) return fail(BAD_PARAM, "fake: %s: gen_index without an axis (%lld)", "pointwise", d->id);
		break;
	case T_OP_POINTWISE: {
		if ((st = require(d, 750, T_POINTWISE, "pointwise op")) || (st = require(d, 751, T_TENSOR, "pointwise op")) ||
		    (st = require(d, 753, T_TENSOR, "pointwise op")))
			return st;
		int np = ports(i32(descAttr(d, 750, 0), 0));
		if ((np >= 3) != (get(d, 752) != NULL)) return fail(BAD_PARAM, "fake: %s: b operand present %lld times wrongly", "pointwise op", get(d, 752) != NULL);
		if ((np == 4) != (get(d, 758) != NULL)) return fail(BAD_PARAM, "fake: %s: t operand present %lld times wrongly", "pointwise op", get(d, 758) != NULL);
		if (np >= 3 && (st = require(d, 752, T_TENSOR, "pointwise op"))) return st;
		if (np == 4 && (st = require(d, 758, T_TENSOR, "pointwise op"))) return st;
		break;
	}
	case T_MATMUL:
		if (!get(d, 1500)) return fail(BAD_PARAM, "fake: %s lacks a compute type (%lld)", "matmul", d->id);
		break;
	case T_OP_MATMUL:
		if ((st = require(d, 1520, T_TENSOR, "matmul op")) || (st = require(d, 1521, T_TENSOR, "matmul op")) ||
		    (st = require(d, 1522, T_TENSOR, "matmul op")) || (st = require(d, 1523, T_MATMUL, "matmul op")))
			return st;
		for (int o = 1525; o <= 1527; o++)
			if (get(d, o) && (st = require(d, o, T_TENSOR, "matmul override"))) return st;
		if ((st = checkMatmul(d))) return st;
		break;
	case T_REDUCTION:
		if (!get(d, 1600) || !get(d, 1601)) return fail(BAD_PARAM, "fake: %s lacks operator or compute type (%lld)", "reduction", d->id);
		break;
	case T_OP_REDUCTION: {
		if ((st = require(d, 1610, T_TENSOR, "reduction op")) || (st = require(d, 1611, T_TENSOR, "reduction op")) ||
		    (st = require(d, 1612, T_REDUCTION, "reduction op")))
			return st;
		int64_t *xd, *yd;
		int nx = ndims(descAttr(d, 1610, 0), &xd), ny = ndims(descAttr(d, 1611, 0), &yd);
		if (nx != ny) return fail(BAD_PARAM, "fake: %s: ranks differ (%lld)", "reduction op", nx);
		for (int i = 0; i < nx; i++)
			if (xd[i] % yd[i] != 0) return fail(BAD_PARAM, "fake: %s: y's axis %lld does not divide x's", "reduction op", i);
		break;
	}
	case T_OP_RESHAPE: {
		if ((st = require(d, 2200, T_TENSOR, "reshape op")) || (st = require(d, 2201, T_TENSOR, "reshape op"))) return st;
		int64_t *xd, *yd, ex = 1, ey = 1;
		int nx = ndims(descAttr(d, 2200, 0), &xd), ny = ndims(descAttr(d, 2201, 0), &yd);
		for (int i = 0; i < nx; i++) ex *= xd[i];
		for (int i = 0; i < ny; i++) ey *= yd[i];
		if (ex != ey) return fail(BAD_PARAM, "fake: %s: element counts differ (%lld)", "reshape op", ex);
		break;
	}
	case T_OP_SDPA_FWD:
		if (cudnnGetVersion() < 91300) return fail(NOT_SUPPORTED, "fake: %s needs 9.13 (this is %lld)", "sdpa op", (long long)cudnnGetVersion());
		for (int a = 2800; a <= 2805; a++)
			if (a != 2804 && (st = require(d, a, T_TENSOR, "sdpa op"))) return st;
		break;
	case T_GRAPH:
		if (!get(d, 800) || !get(d, 801)) return fail(BAD_PARAM, "fake: %s lacks handle or ops (%lld)", "operation graph", d->id);
		for (int i = 0; i < get(d, 801)->n; i++)
			if (!descAttr(d, 801, i)->finalized) return fail(NOT_FINALIZED, "fake: %s: op %lld not finalized", "operation graph", i);
		plansTried = 0;
		break;
	case T_HEUR:
		if ((st = require(d, 201, T_GRAPH, "heuristics"))) return st;
		if (!get(d, 200)) return fail(BAD_PARAM, "fake: %s lacks a mode (%lld)", "heuristics", d->id);
		break;
	case T_PLAN: {
		desc* cfg = descAttr(d, 401, 0);
		if (!get(d, 400) || !cfg || cfg->engine < 0) return fail(BAD_PARAM, "fake: %s lacks a handle or a filled engine config (%lld)", "plan", d->id);
		if (plansTried++ < envInt("FAKE_CUDNN_REFUSE_PLANS", 0))
			return fail(NOT_SUPPORTED, "fake: %s: engine %lld refused", "plan", cfg->engine);
		d->engine = cfg->engine;
		break;
	}
	case T_PACK:
		ints(d, 1000, &n);
		if (!n || !get(d, 1001) || get(d, 1001)->n != n) return fail(BAD_PARAM, "fake: %s: %lld uids and a different number of pointers", "variant pack", n);
		break;
	}
	d->finalized = 1;
	return OK;
}

int cudnnBackendGetAttribute(void* p, int name, int type, int64_t req, int64_t* n, void* v) {
	desc* d = p;
	if (!d->finalized && d->type != T_ENGINECFG) return fail(NOT_FINALIZED, "fake: %s: descriptor %lld not finalized", "get", d->id);
	switch (name) {
	case 202: { // engine heuristics' results
		int k = envInt("FAKE_CUDNN_ENGINES", 2);
		*n = k;
		if (type != Y_DESC) return fail(BAD_TYPE, "fake: %s: results are descriptors (%lld)", "get", type);
		for (int i = 0; i < k && i < req; i++) {
			desc* c = ((desc**)v)[i];
			if (c->type != T_ENGINECFG) return fail(BAD_PARAM, "fake: %s: result %lld is not an engine config", "get", i);
			c->engine = 10 + i;
			c->graph = descAttr(d, 201, 0);
			c->finalized = 1;
		}
		if (req > 0 && req < k) *n = req;
		return OK;
	}
	case 300: { // engine config's engine
		desc* e = *(desc**)v;
		if (e->type != T_ENGINE) return fail(BAD_PARAM, "fake: %s: not an engine descriptor (%lld)", "get", e->type);
		e->engine = d->engine;
		e->finalized = 1;
		*n = 1;
		return OK;
	}
	case 1301:
		*(int64_t*)v = d->engine;
		*n = 1;
		return OK;
	case 402:
		*(int64_t*)v = envInt("FAKE_CUDNN_WORKSPACE", 4096);
		*n = 1;
		return OK;
	case 405:
		*n = snprintf(v, req, "{\"engineId\":%lld}", (long long)d->engine);
		return OK;
	}
	return fail(BAD_PARAM, "fake: %s: attribute %lld cannot be read here", "get", name);
}

// collect gathers the uids of the non-virtual tensors the graph's ops use.
static int collect(desc* d, int64_t* uids, int n) {
	if (d->type == T_TENSOR) {
		attr* v = get(d, 907);
		attr* u = get(d, 906);
		if (!(v && v->v[0]) && u) {
			int64_t id = *(int64_t*)u->v;
			for (int i = 0; i < n; i++)
				if (uids[i] == id) return n;
			uids[n++] = id;
		}
		desc* r = descAttr(d, 913, 0);
		return r ? collect(r, uids, n) : n;
	}
	for (int i = 0; i < d->nattr; i++)
		if (d->a[i].type == Y_DESC)
			for (int j = 0; j < d->a[i].n; j++) n = collect(((desc**)d->a[i].v)[j], uids, n);
	return n;
}

int cudnnBackendExecute(void* h, void* plan, void* pack) {
	desc *p = plan, *vp = pack;
	(void)h;
	if (!p->finalized || !vp->finalized) return fail(NOT_FINALIZED, "fake: %s: plan or pack not finalized (%lld)", "execute", 0);
	int st = envInt("FAKE_CUDNN_EXECUTE_STATUS", 0);
	if (st) return fail(st, "fake: %s fails with status %lld (FAKE_CUDNN_EXECUTE_STATUS)", "execute", st);
	// Every non-virtual tensor of the plan's graph must be in the pack, with memory.
	static int64_t need[4096];
	desc* cfg = descAttr(p, 401, 0);
	int nn = cfg && cfg->graph ? collect(cfg->graph, need, 0) : 0;
	if (!nn) return fail(BAD_PARAM, "fake: %s: the plan has no graph (%lld)", "execute", p->id);
	int64_t n, *uids = ints(vp, 1000, &n);
	void** ptrs = (void**)get(vp, 1001)->v;
	for (int i = 0; i < nn; i++) {
		int found = 0;
		for (int j = 0; j < n; j++)
			if (uids[j] == need[i]) found = ptrs[j] != NULL;
		if (!found) return fail(BAD_PARAM, "fake: %s: the variant pack has no memory for uid %lld", "execute", need[i]);
	}
	fake_executes++;
	return OK;
}

// fake_cudnn_dump lists the live descriptors, oldest first, one attribute a line.
const char* fake_cudnn_dump(void) {
	size_t o = 0;
	int count = 0;
	for (desc* d = all; d; d = d->next) count++;
	desc** list = malloc((count + 1) * sizeof *list);
	int i = count;
	for (desc* d = all; d; d = d->next) list[--i] = d;
	for (i = 0; i < count; i++) {
		desc* d = list[i];
		o += snprintf(dump + o, sizeof dump - o, "d%d type=%d fin=%d engine=%lld\n", d->id, d->type, d->finalized, (long long)d->engine);
		for (int j = 0; j < d->nattr && o < sizeof dump - 256; j++) {
			attr* a = &d->a[j];
			o += snprintf(dump + o, sizeof dump - o, " a%d t%d", a->name, a->type);
			for (int k = 0; k < a->n && o < sizeof dump - 64; k++) {
				switch (a->type) {
				case Y_DESC: o += snprintf(dump + o, sizeof dump - o, " d%d", ((desc**)a->v)[k]->id); break;
				case Y_INT64: o += snprintf(dump + o, sizeof dump - o, " %lld", (long long)((int64_t*)a->v)[k]); break;
				case Y_BOOLEAN: case Y_CHAR: o += snprintf(dump + o, sizeof dump - o, " %d", a->v[k]); break;
				case Y_FLOAT: o += snprintf(dump + o, sizeof dump - o, " %.9g", ((float*)a->v)[k]); break;
				case Y_DOUBLE: o += snprintf(dump + o, sizeof dump - o, " %.17g", ((double*)a->v)[k]); break;
				case Y_HANDLE: case Y_VOID_PTR: o += snprintf(dump + o, sizeof dump - o, " 0x%llx", (unsigned long long)((void**)a->v)[k]); break;
				default: o += snprintf(dump + o, sizeof dump - o, " %d", ((int*)a->v)[k]);
				}
			}
			o += snprintf(dump + o, sizeof dump - o, "\n");
		}
	}
	free(list);
	return dump;
}
