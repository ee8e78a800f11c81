// A fake libnccl.so.2 for the CPU tests of comm/nccl: one rank per communicator,
// "device" pointers are host memory, and the stream is ignored (every call finishes
// before it returns). Group state is per thread, as in NCCL, so a group split across
// threads fails here as it would there. Faults are injected through the environment:
//   FAKE_NCCL_ASYNC=<code>   ncclCommGetAsyncError reports <code>
//   FAKE_NCCL_INIT_HANG=1    ncclCommInitRank blocks while it is set
// and fake_aborts / fake_destroys count ncclCommAbort / ncclCommDestroy calls.
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;

typedef struct { void* buf; size_t bytes; int send; } p2p;

typedef struct {
	int n, rank;
	p2p ops[64];
	int nops;
} fakeComm;

int fake_aborts = 0;
int fake_destroys = 0;
int fake_ids = 0;

static __thread int groupDepth = 0;
static __thread fakeComm* groupComm = NULL;

static size_t typeSize(int dt) {
	switch (dt) {
	case 0: case 1: return 1;
	case 2: case 3: case 7: return 4;
	case 4: case 5: case 8: return 8;
	case 6: case 9: return 2;
	}
	return 0;
}

int ncclGetVersion(int* v) { *v = 22803; return 0; }

int ncclGetUniqueId(ncclUniqueId* id) {
	memset(id->internal, 0, sizeof id->internal);
	snprintf(id->internal, sizeof id->internal, "fake-nccl-id-%d", ++fake_ids);
	return 0;
}

int ncclCommInitRank(void** comm, int n, ncclUniqueId id, int rank) {
	if (strncmp(id.internal, "fake-nccl-id-", 13) != 0) return 4; /* ncclInvalidArgument */
	while (getenv("FAKE_NCCL_INIT_HANG") != NULL) usleep(1000);
	if (n != 1 || rank != 0) return 5; /* the fake has one rank */
	fakeComm* c = calloc(1, sizeof *c);
	c->n = n;
	c->rank = rank;
	*comm = c;
	return 0;
}

int ncclCommDestroy(void* comm) { fake_destroys++; free(comm); return 0; }
int ncclCommAbort(void* comm) { fake_aborts++; free(comm); return 0; }

int ncclCommGetAsyncError(void* comm, int* err) {
	const char* s = getenv("FAKE_NCCL_ASYNC");
	*err = s ? atoi(s) : 0;
	return comm ? 0 : 4;
}

const char* ncclGetErrorString(int r) {
	static char buf[64];
	snprintf(buf, sizeof buf, "fake error string %d", r);
	return buf;
}

const char* ncclGetLastError(void* comm) { return "fake last error"; }

int ncclCommCount(void* comm, int* n) { *n = ((fakeComm*)comm)->n; return 0; }
int ncclCommUserRank(void* comm, int* r) { *r = ((fakeComm*)comm)->rank; return 0; }

int ncclGroupStart(void) { groupDepth++; return 0; }

/* match the group's sends and receives in order, as NCCL does between a pair */
static int flush(fakeComm* c) {
	int s = 0, r = 0, err = 0;
	for (;;) {
		while (s < c->nops && !c->ops[s].send) s++;
		while (r < c->nops && c->ops[r].send) r++;
		if (s >= c->nops || r >= c->nops) break;
		if (c->ops[s].bytes != c->ops[r].bytes) err = 5;
		else memmove(c->ops[r].buf, c->ops[s].buf, c->ops[s].bytes);
		s++;
		r++;
	}
	if (s < c->nops || r < c->nops) {
		while (s < c->nops && !c->ops[s].send) s++;
		while (r < c->nops && c->ops[r].send) r++;
		if (s < c->nops || r < c->nops) err = 5; /* unmatched: NCCL would hang */
	}
	c->nops = 0;
	return err;
}

int ncclGroupEnd(void) {
	if (groupDepth == 0) return 5;
	if (--groupDepth > 0 || groupComm == NULL) return 0;
	fakeComm* c = groupComm;
	groupComm = NULL;
	return flush(c);
}

static int post(void* buf, size_t count, int dt, int peer, void* comm, int send) {
	fakeComm* c = comm;
	if (typeSize(dt) == 0 || peer != c->rank) return 4;
	if (c->nops == 64) return 3;
	c->ops[c->nops++] = (p2p){buf, count * typeSize(dt), send};
	if (groupDepth == 0) return flush(c); /* alone: a self send never matches */
	groupComm = c;
	return 0;
}

int ncclSend(const void* buf, size_t count, int dt, int peer, void* comm, void* stream) {
	return post((void*)buf, count, dt, peer, comm, 1);
}
int ncclRecv(void* buf, size_t count, int dt, int peer, void* comm, void* stream) {
	return post(buf, count, dt, peer, comm, 0);
}

static int copy(const void* s, void* r, size_t count, int dt) {
	if (typeSize(dt) == 0) return 4;
	memmove(r, s, count * typeSize(dt));
	return 0;
}

int ncclAllGather(const void* s, void* r, size_t count, int dt, void* comm, void* stream) { return copy(s, r, count, dt); }
int ncclReduceScatter(const void* s, void* r, size_t count, int dt, int op, void* comm, void* stream) {
	return op < 0 || op > 4 ? 4 : copy(s, r, count, dt);
}
int ncclAllReduce(const void* s, void* r, size_t count, int dt, int op, void* comm, void* stream) {
	return op < 0 || op > 4 ? 4 : copy(s, r, count, dt);
}
#ifdef WITH_ALLTOALL
int ncclAlltoAll(const void* s, void* r, size_t count, int dt, void* comm, void* stream) {
	if (s == r) return 4;
	return copy(s, r, count, dt);
}
#endif

int ncclCommSplit(void* comm, int color, int key, void** out, void* config) {
	if (config != NULL) return 4;
	if (color == -1) { *out = NULL; return 0; }
	fakeComm* c = calloc(1, sizeof *c);
	c->n = 1;
	*out = c;
	return 0;
}

int ncclMemAlloc(void** p, size_t n) { *p = malloc(n); return *p ? 0 : 2; }
int ncclMemFree(void* p) { free(p); return 0; }
