// Small helpers for cgo: MPI's handles are macros that cgo cannot name.
#ifndef LC_MPI_H
#define LC_MPI_H
#include <mpi.h>
#include <stdlib.h>

static MPI_Comm lc_world(void) { return MPI_COMM_WORLD; }
static MPI_Comm lc_comm_null(void) { return MPI_COMM_NULL; }
static MPI_Datatype lc_type(int code) {
	switch (code) {
	case 1: return MPI_FLOAT;
	case 2: return MPI_DOUBLE;
	case 3: return MPI_UINT16_T;
	}
	return MPI_BYTE;
}
static MPI_Op lc_op(int code) { return code == 1 ? MPI_MAX : MPI_SUM; }
static void lc_null_reqs(MPI_Request *r, int n) { for (int i = 0; i < n; i++) r[i] = MPI_REQUEST_NULL; }
static int lc_testall(int n, MPI_Request *r, int *flag) { return MPI_Testall(n, r, flag, MPI_STATUSES_IGNORE); }
static int lc_test(MPI_Request *r, int *flag) { return MPI_Test(r, flag, MPI_STATUS_IGNORE); }
static int lc_init(int *provided) {
	int done = 0;
	MPI_Initialized(&done);
	if (done) { MPI_Query_thread(provided); return MPI_SUCCESS; }
	int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
	if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	return rc;
}
static int lc_thread_serialized(void) { return MPI_THREAD_SERIALIZED; }
static int lc_undefined(void) { return MPI_UNDEFINED; }
static int lc_version(char *buf, int *len) { return MPI_Get_library_version(buf, len); }
static int lc_max_version(void) { return MPI_MAX_LIBRARY_VERSION_STRING; }
#endif
