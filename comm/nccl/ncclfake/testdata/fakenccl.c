// A fake libnccl.so.2 for the CPU tests of comm/nccl. Ranks are threads of one process
// that share a clique found by the unique id; "device" pointers are host memory; the
// stream is ignored: each call (or group) finishes before it returns, and a receive
// blocks in the host until its message arrives. Messages are buffered (copied at send).
// Group state is per thread, as in NCCL, so a group split across threads fails here as
// it would there. Reductions support fp16, bf16, fp32 and fp64 (sum, max). Faults through the environment:
//   FAKE_NCCL_ASYNC=<code>   ncclCommGetAsyncError reports <code>
//   FAKE_NCCL_INIT_HANG=1    ncclCommInitRank blocks while it is set
//   FAKE_NCCL_DESTROY_US=<n> ncclCommDestroy takes n microseconds (default 1000)
// fake_aborts / fake_destroys count ncclCommAbort / ncclCommDestroy calls.
//
// A destroyed or aborted communicator is never freed: it is marked, and every later call
// on it (and every call while ncclCommDestroy runs, which NCCL's own object check would
// see as a corrupted communicator) fails with ncclInvalidArgument and counts in
// fake_use_after_destroy, so a use after destroy is seen, not undefined behaviour.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;

enum { ok = 0, internalError = 3, invalidArgument = 4, invalidUsage = 5, remoteError = 6 };
#define MAXR 16
#define MAXOPS 256

typedef struct msg { struct msg* next; size_t bytes; char data[]; } msg;

typedef struct clique {
	char id[128];
	int n, joined;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	msg* box[MAXR][MAXR]; /* box[src][dst]: FIFO */
	int aborted;
	/* split rendezvous */
	int splitArrived, splitGen;
	int colors[MAXR], keys[MAXR];
	struct clique* children[MAXR];
	struct clique* next;
} clique;

typedef struct { void* buf; size_t bytes; int peer, send; } op;

enum { live = 0, destroying = 1, destroyed = 2, aborted = 3 };

typedef struct {
	clique* q;
	int rank;
	op ops[MAXOPS];
	int nops;
	volatile int state; /* live, destroying, destroyed or aborted */
} fakeComm;

int fake_aborts = 0;
int fake_destroys = 0;
int fake_use_after_destroy = 0;

/* usable says whether comm may be used; a comm being destroyed, destroyed or aborted
   (or none at all) counts as a use after destroy. Abort is allowed on a live comm and on
   an aborted one (NCCL callers may abort twice from two threads); not after destroy. */
static int usable(void* comm, int abortCall) {
	fakeComm* c = comm;
	if (c == NULL) return 0;
	int s = __atomic_load_n(&c->state, __ATOMIC_SEQ_CST);
	if (s == live || (abortCall && s == aborted)) return 1;
	__sync_fetch_and_add(&fake_use_after_destroy, 1);
	fprintf(stderr, "fakenccl: call on a communicator that is %s\n",
		s == destroying ? "being destroyed" : s == destroyed ? "destroyed" : "aborted");
	return 0;
}
static int ids = 0;
static clique* cliques = NULL;
static pthread_mutex_t global = PTHREAD_MUTEX_INITIALIZER;

static __thread int groupDepth = 0;
static __thread fakeComm* groupComms[8];
static __thread int nGroupComms = 0;

static size_t typeSize(int dt) {
	switch (dt) {
	case 0: case 1: return 1;
	case 2: case 3: case 7: return 4;
	case 4: case 5: case 8: return 8;
	case 6: case 9: return 2;
	}
	return 0;
}

int ncclGetVersion(int* v) { *v = 22803; return ok; }

int ncclGetUniqueId(ncclUniqueId* id) {
	memset(id->internal, 0, sizeof id->internal);
	pthread_mutex_lock(&global);
	snprintf(id->internal, sizeof id->internal, "fake-nccl-id-%d", ++ids);
	pthread_mutex_unlock(&global);
	return ok;
}

static clique* newClique(const char* id, int n) {
	clique* q = calloc(1, sizeof *q);
	memcpy(q->id, id, 128);
	q->n = n;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	return q;
}

int ncclCommInitRank(void** comm, int n, ncclUniqueId id, int rank) {
	if (strncmp(id.internal, "fake-nccl-id-", 13) != 0) return invalidArgument;
	if (n < 1 || n > MAXR || rank < 0 || rank >= n) return invalidArgument;
	while (getenv("FAKE_NCCL_INIT_HANG") != NULL) usleep(1000);
	pthread_mutex_lock(&global);
	clique* q = cliques;
	while (q && memcmp(q->id, id.internal, 128) != 0) q = q->next;
	if (!q) {
		q = newClique(id.internal, n);
		q->next = cliques;
		cliques = q;
	}
	pthread_mutex_unlock(&global);
	if (q->n != n) return invalidUsage;
	pthread_mutex_lock(&q->mu);
	q->joined++;
	pthread_cond_broadcast(&q->cv);
	while (q->joined < n && !q->aborted) pthread_cond_wait(&q->cv, &q->mu);
	pthread_mutex_unlock(&q->mu);
	fakeComm* c = calloc(1, sizeof *c);
	c->q = q;
	c->rank = rank;
	*comm = c;
	return ok;
}

int ncclCommDestroy(void* comm) {
	if (!usable(comm, 0)) return invalidArgument;
	__sync_fetch_and_add(&fake_destroys, 1);
	fakeComm* c = comm;
	__atomic_store_n(&c->state, destroying, __ATOMIC_SEQ_CST);
	const char* s = getenv("FAKE_NCCL_DESTROY_US");
	usleep(s ? atoi(s) : 1000); /* NCCL's destroy takes a while: long enough to be seen */
	__atomic_store_n(&c->state, destroyed, __ATOMIC_SEQ_CST);
	return ok; /* not freed: a later use is detected */
}

int ncclCommAbort(void* comm) {
	if (!usable(comm, 1)) return invalidArgument;
	__sync_fetch_and_add(&fake_aborts, 1);
	fakeComm* c = comm;
	__atomic_store_n(&c->state, aborted, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&c->q->mu);
	c->q->aborted = 1; /* wakes every rank blocked on this clique */
	pthread_cond_broadcast(&c->q->cv);
	pthread_mutex_unlock(&c->q->mu);
	return ok; /* not freed: another thread may still be inside a call on it */
}

int ncclCommGetAsyncError(void* comm, int* err) {
	if (!usable(comm, 0)) return invalidArgument; /* NCCL: "corrupted comm object detected" */
	const char* s = getenv("FAKE_NCCL_ASYNC");
	*err = s ? atoi(s) : 0;
	return ok;
}

const char* ncclGetErrorString(int r) {
	static __thread char buf[64];
	snprintf(buf, sizeof buf, "fake error string %d", r);
	return buf;
}

const char* ncclGetLastError(void* comm) { return "fake last error"; }

int ncclCommCount(void* comm, int* n) {
	if (!usable(comm, 0)) return invalidArgument;
	*n = ((fakeComm*)comm)->q->n;
	return ok;
}
int ncclCommUserRank(void* comm, int* r) {
	if (!usable(comm, 0)) return invalidArgument;
	*r = ((fakeComm*)comm)->rank;
	return ok;
}

/* put and take move one message between ranks of a clique. */
static void put(clique* q, int src, int dst, const void* buf, size_t bytes) {
	msg* m = malloc(sizeof *m + bytes);
	m->next = NULL;
	m->bytes = bytes;
	memcpy(m->data, buf, bytes);
	pthread_mutex_lock(&q->mu);
	msg** p = &q->box[src][dst];
	while (*p) p = &(*p)->next;
	*p = m;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

/* take waits for the next message from src; a message to oneself must already be there
   (NCCL would hang). */
static msg* take(clique* q, int src, int dst, int* err) {
	pthread_mutex_lock(&q->mu);
	if (src == dst && !q->box[src][dst]) {
		pthread_mutex_unlock(&q->mu);
		*err = invalidUsage;
		return NULL;
	}
	while (!q->box[src][dst] && !q->aborted) pthread_cond_wait(&q->cv, &q->mu);
	msg* m = q->box[src][dst];
	if (m) q->box[src][dst] = m->next;
	else *err = remoteError;
	pthread_mutex_unlock(&q->mu);
	return m;
}

static int flush(fakeComm* c) {
	int err = ok, self = 0;
	for (int i = 0; i < c->nops; i++)
		if (c->ops[i].peer == c->rank) self += c->ops[i].send ? 1 : -1;
	if (self != 0) { /* a send to oneself with no receive (or the reverse): NCCL would hang */
		c->nops = 0;
		return invalidUsage;
	}
	for (int i = 0; i < c->nops; i++)
		if (c->ops[i].send) put(c->q, c->rank, c->ops[i].peer, c->ops[i].buf, c->ops[i].bytes);
	for (int i = 0; i < c->nops && err == ok; i++) {
		if (c->ops[i].send) continue;
		msg* m = take(c->q, c->ops[i].peer, c->rank, &err);
		if (!m) break;
		if (m->bytes != c->ops[i].bytes) err = invalidUsage;
		else memcpy(c->ops[i].buf, m->data, m->bytes);
		free(m);
	}
	c->nops = 0;
	return err;
}

int ncclGroupStart(void) { groupDepth++; return ok; }

int ncclGroupEnd(void) {
	if (groupDepth == 0) return invalidUsage;
	if (--groupDepth > 0) return ok;
	int err = ok;
	for (int i = 0; i < nGroupComms; i++) {
		int e = flush(groupComms[i]);
		if (err == ok) err = e;
	}
	nGroupComms = 0;
	return err;
}

static int post(void* buf, size_t count, int dt, int peer, void* comm, int send) {
	if (!usable(comm, 0)) return invalidArgument;
	fakeComm* c = comm;
	if (typeSize(dt) == 0 || peer < 0 || peer >= c->q->n) return invalidArgument;
	if (c->nops == MAXOPS) return internalError;
	c->ops[c->nops++] = (op){buf, count * typeSize(dt), peer, send};
	if (groupDepth == 0) return flush(c);
	int seen = 0;
	for (int i = 0; i < nGroupComms; i++) seen |= groupComms[i] == c;
	if (!seen) {
		if (nGroupComms == 8) return internalError;
		groupComms[nGroupComms++] = c;
	}
	return ok;
}

int ncclSend(const void* buf, size_t count, int dt, int peer, void* comm, void* stream) {
	return post((void*)buf, count, dt, peer, comm, 1);
}
int ncclRecv(void* buf, size_t count, int dt, int peer, void* comm, void* stream) {
	return post(buf, count, dt, peer, comm, 0);
}

/* exchange sends part(r) of send to every rank and receives every rank's part into
   recv+r*stride (stride 0: into a scratch list for reductions). */
static int exchange(fakeComm* c, const char* send, size_t sendStride, size_t bytes, msg** got) {
	clique* q = c->q;
	for (int r = 0; r < q->n; r++) put(q, c->rank, r, send + r * sendStride, bytes);
	int err = ok;
	for (int r = 0; r < q->n; r++) {
		got[r] = take(q, r, c->rank, &err);
		if (!got[r]) {
			for (int k = 0; k < r; k++) free(got[k]);
			return err;
		}
	}
	return ok;
}

static float bf16f(uint16_t h) { uint32_t b = (uint32_t)h << 16; float f; memcpy(&f, &b, 4); return f; }
static uint16_t fbf16(float f) {
	uint32_t b;
	memcpy(&b, &f, 4);
	b += 0x7fff + ((b >> 16) & 1);
	return (uint16_t)(b >> 16);
}

/* reduce combines n messages of count elements into out (sum or max). */
static int reduce(msg** ms, int n, size_t off, size_t count, int dt, int opc, void* out) {
	if (opc != 0 && opc != 2) return invalidArgument;
	for (size_t i = 0; i < count; i++) {
		double acc = 0;
		for (int r = 0; r < n; r++) {
			double v;
			const char* p = ms[r]->data + off;
			switch (dt) {
			case 7: v = ((const float*)p)[i]; break;
			case 8: v = ((const double*)p)[i]; break;
			case 9: v = bf16f(((const uint16_t*)p)[i]); break;
			case 6: v = (double)((const _Float16*)p)[i]; break;
			default: return invalidArgument;
			}
			if (r == 0) acc = v;
			else if (opc == 0) acc += v;
			else if (v > acc) acc = v;
		}
		switch (dt) {
		case 7: ((float*)out)[i] = (float)acc; break;
		case 8: ((double*)out)[i] = acc; break;
		case 9: ((uint16_t*)out)[i] = fbf16((float)acc); break;
		case 6: ((_Float16*)out)[i] = (_Float16)acc; break;
		}
	}
	return ok;
}

static void freeAll(msg** ms, int n) { for (int r = 0; r < n; r++) free(ms[r]); }

int ncclAllGather(const void* s, void* r, size_t count, int dt, void* comm, void* stream) {
	if (!usable(comm, 0)) return invalidArgument;
	fakeComm* c = comm;
	size_t b = count * typeSize(dt);
	if (b == 0 && count) return invalidArgument;
	msg* ms[MAXR];
	int err = exchange(c, s, 0, b, ms);
	if (err) return err;
	for (int k = 0; k < c->q->n; k++) memcpy((char*)r + k * b, ms[k]->data, b);
	freeAll(ms, c->q->n);
	return ok;
}

int ncclReduceScatter(const void* s, void* r, size_t count, int dt, int opc, void* comm, void* stream) {
	if (!usable(comm, 0)) return invalidArgument;
	fakeComm* c = comm;
	size_t b = count * typeSize(dt);
	if (b == 0 && count) return invalidArgument;
	msg* ms[MAXR];
	int err = exchange(c, s, b, b, ms);
	if (err) return err;
	err = reduce(ms, c->q->n, 0, count, dt, opc, r);
	freeAll(ms, c->q->n);
	return err;
}

int ncclAllReduce(const void* s, void* r, size_t count, int dt, int opc, void* comm, void* stream) {
	if (!usable(comm, 0)) return invalidArgument;
	fakeComm* c = comm;
	size_t b = count * typeSize(dt);
	if (b == 0 && count) return invalidArgument;
	msg* ms[MAXR];
	int err = exchange(c, s, 0, b, ms);
	if (err) return err;
	err = reduce(ms, c->q->n, 0, count, dt, opc, r);
	freeAll(ms, c->q->n);
	return err;
}

#ifdef WITH_ALLTOALL
int ncclAlltoAll(const void* s, void* r, size_t count, int dt, void* comm, void* stream) {
	if (!usable(comm, 0)) return invalidArgument;
	fakeComm* c = comm;
	size_t b = count * typeSize(dt);
	if (s == r || (b == 0 && count)) return invalidArgument;
	msg* ms[MAXR];
	int err = exchange(c, s, b, b, ms);
	if (err) return err;
	for (int k = 0; k < c->q->n; k++) memcpy((char*)r + k * b, ms[k]->data, b);
	freeAll(ms, c->q->n);
	return ok;
}
#endif

/* ncclCommSplit: every rank of the parent arrives; ranks with the same color share a
   child clique, ordered by (key, parent rank). */
int ncclCommSplit(void* comm, int color, int key, void** out, void* config) {
	if (config != NULL) return invalidArgument;
	if (!usable(comm, 0)) return invalidArgument;
	fakeComm* c = comm;
	clique* q = c->q;
	pthread_mutex_lock(&q->mu);
	int gen = q->splitGen;
	q->colors[c->rank] = color;
	q->keys[c->rank] = key;
	if (++q->splitArrived == q->n) {
		memset(q->children, 0, sizeof q->children);
		for (int r = 0; r < q->n; r++) {
			if (q->colors[r] < 0 || q->children[r]) continue;
			int members = 0;
			for (int k = 0; k < q->n; k++) members += q->colors[k] == q->colors[r];
			char id[128] = {0};
			snprintf(id, sizeof id, "fake-nccl-split-%p-%d-%d", (void*)q, gen, q->colors[r]);
			clique* child = newClique(id, members);
			child->joined = members;
			for (int k = 0; k < q->n; k++)
				if (q->colors[k] == q->colors[r]) q->children[k] = child;
		}
		q->splitArrived = 0;
		q->splitGen++;
		pthread_cond_broadcast(&q->cv);
	}
	while (q->splitGen == gen && !q->aborted) pthread_cond_wait(&q->cv, &q->mu);
	clique* child = q->children[c->rank];
	int me = 0;
	for (int k = 0; k < q->n; k++)
		if (q->colors[k] == color && (q->keys[k] < key || (q->keys[k] == key && k < c->rank))) me++;
	int aborted = q->aborted && q->splitGen == gen;
	pthread_mutex_unlock(&q->mu);
	if (aborted) return remoteError;
	if (color < 0) { *out = NULL; return ok; }
	fakeComm* nc = calloc(1, sizeof *nc);
	nc->q = child;
	nc->rank = me;
	*out = nc;
	return ok;
}

int ncclMemAlloc(void** p, size_t n) { *p = calloc(1, n); return *p ? ok : 2; }
int ncclMemFree(void* p) { free(p); return ok; }
