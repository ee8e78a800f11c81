package nccl

/*
#include <stddef.h>
#include <stdint.h>

// The few NCCL types longca needs, declared here so no NCCL header is needed to build.
// Handles (ncclComm_t, cudaStream_t) and buffers travel as uintptr_t so Go never holds
// a C pointer it did not allocate; enums travel as int, which is their ABI.
typedef struct { char internal[128]; } ncclUniqueId;

// One trampoline per C signature: cgo cannot call a function pointer directly.
static int nccl_int_intp(void* f, int* v) { return ((int (*)(int*))f)(v); }
static int nccl_int_idp(void* f, ncclUniqueId* id) { return ((int (*)(ncclUniqueId*))f)(id); }
static int nccl_init_rank(void* f, uintptr_t* comm, int nranks, ncclUniqueId* id, int rank) {
	return ((int (*)(void**, int, ncclUniqueId, int))f)((void**)comm, nranks, *id, rank);
}
static int nccl_int_comm(void* f, uintptr_t comm) { return ((int (*)(void*))f)((void*)comm); }
static int nccl_int_comm_intp(void* f, uintptr_t comm, int* v) { return ((int (*)(void*, int*))f)((void*)comm, v); }
static const char* nccl_str_int(void* f, int r) { return ((const char* (*)(int))f)(r); }
static const char* nccl_str_comm(void* f, uintptr_t comm) { return ((const char* (*)(void*))f)((void*)comm); }
static int nccl_int_void(void* f) { return ((int (*)(void))f)(); }
static int nccl_p2p(void* f, uintptr_t buf, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream) {
	return ((int (*)(void*, size_t, int, int, void*, void*))f)((void*)buf, count, dt, peer, (void*)comm, (void*)stream);
}
static int nccl_coll(void* f, uintptr_t send, uintptr_t recv, size_t count, int dt, uintptr_t comm, uintptr_t stream) {
	return ((int (*)(const void*, void*, size_t, int, void*, void*))f)((const void*)send, (void*)recv, count, dt, (void*)comm, (void*)stream);
}
static int nccl_reduce(void* f, uintptr_t send, uintptr_t recv, size_t count, int dt, int op, uintptr_t comm, uintptr_t stream) {
	return ((int (*)(const void*, void*, size_t, int, int, void*, void*))f)((const void*)send, (void*)recv, count, dt, op, (void*)comm, (void*)stream);
}
static int nccl_split(void* f, uintptr_t comm, int color, int key, uintptr_t* out) {
	return ((int (*)(void*, int, int, void**, void*))f)((void*)comm, color, key, (void**)out, NULL);
}
static int nccl_mem_alloc(void* f, uintptr_t* p, size_t n) { return ((int (*)(void**, size_t))f)((void**)p, n); }
static int nccl_mem_free(void* f, uintptr_t p) { return ((int (*)(void*))f)((void*)p); }
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/longca/longca/internal/dl"
)

// DefaultLibrary is the soname dlopen looks for.
const DefaultLibrary = "libnccl.so.2"

// IDBytes is the size of ncclUniqueId.
const IDBytes = 128

// UniqueID is ncclUniqueId: made by rank 0, shared with every rank before init.
type UniqueID [IDBytes]byte

// Lib is an opened NCCL library with its symbols resolved.
type Lib struct {
	dl      *dl.Library
	version int

	getVersion, getUniqueID, commInitRank, commDestroy, commAbort unsafe.Pointer
	commGetAsyncError, getErrorString, getLastError               unsafe.Pointer
	groupStart, groupEnd, send, recv                              unsafe.Pointer
	allGather, reduceScatter, allReduce, alltoAll, commSplit      unsafe.Pointer
	commCount, commUserRank, memAlloc, memFree                    unsafe.Pointer
}

// required are the symbols every NCCL 2.x since 2.7 has.
var required = []string{
	"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy",
	"ncclCommAbort", "ncclCommGetAsyncError", "ncclGetErrorString", "ncclGroupStart",
	"ncclGroupEnd", "ncclSend", "ncclRecv", "ncclAllGather", "ncclReduceScatter",
	"ncclAllReduce", "ncclCommCount", "ncclCommUserRank",
}

// Load opens libnccl.so.2 from the loader's path.
func Load() (*Lib, error) { return Open(DefaultLibrary) }

// Open opens NCCL from the first of names that loads (a soname or a path) and
// resolves its symbols. ncclAlltoAll (2.28.3), ncclCommSplit (2.18) and
// ncclGetLastError (2.13) are optional: Has says whether they are there.
func Open(names ...string) (*Lib, error) {
	if len(names) == 0 {
		names = []string{DefaultLibrary}
	}
	l, err := dl.Open(names...)
	if err != nil {
		return nil, fmt.Errorf("nccl: %w (install NCCL 2.x, or put the directory holding it on LD_LIBRARY_PATH)", err)
	}
	lib, err := resolve(l)
	if err != nil {
		l.Close()
		return nil, err
	}
	return lib, nil
}

func resolve(l *dl.Library) (*Lib, error) {
	lib := &Lib{dl: l}
	ptrs := []*unsafe.Pointer{
		&lib.getVersion, &lib.getUniqueID, &lib.commInitRank, &lib.commDestroy,
		&lib.commAbort, &lib.commGetAsyncError, &lib.getErrorString, &lib.groupStart,
		&lib.groupEnd, &lib.send, &lib.recv, &lib.allGather, &lib.reduceScatter,
		&lib.allReduce, &lib.commCount, &lib.commUserRank,
	}
	for i, name := range required {
		p, err := l.Sym(name)
		if err != nil {
			return nil, fmt.Errorf("nccl: %w: NCCL older than 2.7, or not NCCL", err)
		}
		*ptrs[i] = p
	}
	lib.alltoAll, _ = l.Sym("ncclAlltoAll")
	lib.commSplit, _ = l.Sym("ncclCommSplit")
	lib.getLastError, _ = l.Sym("ncclGetLastError")
	lib.memAlloc, _ = l.Sym("ncclMemAlloc")
	lib.memFree, _ = l.Sym("ncclMemFree")
	var v C.int
	if r := Result(C.nccl_int_intp(lib.getVersion, &v)); r != Success {
		return nil, lib.err("ncclGetVersion", r, 0)
	}
	lib.version = int(v)
	return lib, nil
}

// Path is the name the library was opened by.
func (l *Lib) Path() string { return l.dl.Name }

// Has says whether the library exports the symbol (e.g. "ncclAlltoAll").
func (l *Lib) Has(symbol string) bool { return l.dl.Has(symbol) }

// Symbol resolves any symbol of the library (the tests read the fake library's
// counters through it).
func (l *Lib) Symbol(name string) (unsafe.Pointer, error) { return l.dl.Sym(name) }

// Version is ncclGetVersion's code (22803 for 2.28.3).
func (l *Lib) Version() int { return l.version }

// VersionString is the version as major.minor.patch.
func (l *Lib) VersionString() string { return VersionString(l.version) }

// VersionString decodes an NCCL version code: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
func VersionString(code int) string {
	if code < 10000 {
		return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
}

// ErrorString is ncclGetErrorString(r).
func (l *Lib) ErrorString(r Result) string {
	return C.GoString(C.nccl_str_int(l.getErrorString, C.int(r)))
}

// LastError is ncclGetLastError(comm), or "" where the library lacks it.
func (l *Lib) LastError(comm uintptr) string {
	if l.getLastError == nil {
		return ""
	}
	return C.GoString(C.nccl_str_comm(l.getLastError, C.uintptr_t(comm)))
}

// err turns a result into an *Error carrying what the library says about it, or nil.
func (l *Lib) err(op string, r Result, comm uintptr) error {
	if r == Success {
		return nil
	}
	return &Error{Op: op, Code: r, Msg: l.ErrorString(r), Last: l.LastError(comm)}
}

// GetUniqueID is ncclGetUniqueId.
func (l *Lib) GetUniqueID() (UniqueID, error) {
	var id C.ncclUniqueId
	var out UniqueID
	if r := Result(C.nccl_int_idp(l.getUniqueID, &id)); r != Success {
		return out, l.err("ncclGetUniqueId", r, 0)
	}
	copy(out[:], C.GoBytes(unsafe.Pointer(&id), IDBytes))
	return out, nil
}

// CommInitRank is ncclCommInitRank: it blocks until all nranks ranks have called it
// with the same id, on the CUDA device current on the calling thread.
func (l *Lib) CommInitRank(nranks int, id UniqueID, rank int) (uintptr, error) {
	var cid C.ncclUniqueId
	for i, b := range id {
		cid.internal[i] = C.char(b)
	}
	var h C.uintptr_t
	r := Result(C.nccl_init_rank(l.commInitRank, &h, C.int(nranks), &cid, C.int(rank)))
	return uintptr(h), l.err("ncclCommInitRank", r, 0)
}

// CommDestroy is ncclCommDestroy.
func (l *Lib) CommDestroy(comm uintptr) error {
	return l.err("ncclCommDestroy", Result(C.nccl_int_comm(l.commDestroy, C.uintptr_t(comm))), 0)
}

// CommAbort is ncclCommAbort.
func (l *Lib) CommAbort(comm uintptr) error {
	return l.err("ncclCommAbort", Result(C.nccl_int_comm(l.commAbort, C.uintptr_t(comm))), 0)
}

// CommGetAsyncError is ncclCommGetAsyncError: the communicator's asynchronous state
// (Success, InProgress, or the error that broke it).
func (l *Lib) CommGetAsyncError(comm uintptr) (Result, error) {
	var v C.int
	r := Result(C.nccl_int_comm_intp(l.commGetAsyncError, C.uintptr_t(comm), &v))
	return Result(v), l.err("ncclCommGetAsyncError", r, comm)
}

// CommCount is ncclCommCount.
func (l *Lib) CommCount(comm uintptr) (int, error) {
	var v C.int
	r := Result(C.nccl_int_comm_intp(l.commCount, C.uintptr_t(comm), &v))
	return int(v), l.err("ncclCommCount", r, comm)
}

// CommUserRank is ncclCommUserRank.
func (l *Lib) CommUserRank(comm uintptr) (int, error) {
	var v C.int
	r := Result(C.nccl_int_comm_intp(l.commUserRank, C.uintptr_t(comm), &v))
	return int(v), l.err("ncclCommUserRank", r, comm)
}

// GroupStart is ncclGroupStart. NCCL keeps group state per thread: the matching
// GroupEnd and the calls between must run on the same OS thread.
func (l *Lib) GroupStart() error {
	return l.err("ncclGroupStart", Result(C.nccl_int_void(l.groupStart)), 0)
}

// GroupEnd is ncclGroupEnd.
func (l *Lib) GroupEnd() error {
	return l.err("ncclGroupEnd", Result(C.nccl_int_void(l.groupEnd)), 0)
}

// Send is ncclSend of count elements at buf to peer, enqueued on stream.
func (l *Lib) Send(buf uintptr, count int, dt DataType, peer int, comm, stream uintptr) error {
	r := C.nccl_p2p(l.send, C.uintptr_t(buf), C.size_t(count), C.int(dt), C.int(peer), C.uintptr_t(comm), C.uintptr_t(stream))
	return l.err("ncclSend", Result(r), comm)
}

// Recv is ncclRecv of count elements into buf from peer, enqueued on stream.
func (l *Lib) Recv(buf uintptr, count int, dt DataType, peer int, comm, stream uintptr) error {
	r := C.nccl_p2p(l.recv, C.uintptr_t(buf), C.size_t(count), C.int(dt), C.int(peer), C.uintptr_t(comm), C.uintptr_t(stream))
	return l.err("ncclRecv", Result(r), comm)
}

// AllGather is ncclAllGather; count is the elements each rank sends.
func (l *Lib) AllGather(send, recv uintptr, count int, dt DataType, comm, stream uintptr) error {
	r := C.nccl_coll(l.allGather, C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.uintptr_t(comm), C.uintptr_t(stream))
	return l.err("ncclAllGather", Result(r), comm)
}

// AlltoAll is ncclAlltoAll (NCCL 2.28.3 and later); count is the elements sent to
// each rank. Check Has("ncclAlltoAll") first.
func (l *Lib) AlltoAll(send, recv uintptr, count int, dt DataType, comm, stream uintptr) error {
	if l.alltoAll == nil {
		return fmt.Errorf("nccl: ncclAlltoAll: NCCL %s lacks it (it came in 2.28.3)", l.VersionString())
	}
	r := C.nccl_coll(l.alltoAll, C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.uintptr_t(comm), C.uintptr_t(stream))
	return l.err("ncclAlltoAll", Result(r), comm)
}

// ReduceScatter is ncclReduceScatter; count is the elements each rank receives.
func (l *Lib) ReduceScatter(send, recv uintptr, count int, dt DataType, op RedOp, comm, stream uintptr) error {
	r := C.nccl_reduce(l.reduceScatter, C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(op), C.uintptr_t(comm), C.uintptr_t(stream))
	return l.err("ncclReduceScatter", Result(r), comm)
}

// AllReduce is ncclAllReduce of count elements (in place when send == recv).
func (l *Lib) AllReduce(send, recv uintptr, count int, dt DataType, op RedOp, comm, stream uintptr) error {
	r := C.nccl_reduce(l.allReduce, C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(op), C.uintptr_t(comm), C.uintptr_t(stream))
	return l.err("ncclAllReduce", Result(r), comm)
}

// SplitNoColor is NCCL_SPLIT_NOCOLOR: the rank joins no new communicator.
const SplitNoColor = -1

// CommSplit is ncclCommSplit (NCCL 2.18 and later) with the parent's configuration.
// A rank that passes SplitNoColor gets 0.
func (l *Lib) CommSplit(comm uintptr, color, key int) (uintptr, error) {
	if l.commSplit == nil {
		return 0, fmt.Errorf("nccl: ncclCommSplit: NCCL %s lacks it (it came in 2.18)", l.VersionString())
	}
	var h C.uintptr_t
	r := C.nccl_split(l.commSplit, C.uintptr_t(comm), C.int(color), C.int(key), &h)
	return uintptr(h), l.err("ncclCommSplit", Result(r), comm)
}

// MemAlloc is ncclMemAlloc (NCCL 2.19 and later): device memory on the current device.
func (l *Lib) MemAlloc(bytes int) (uintptr, error) {
	if l.memAlloc == nil || l.memFree == nil {
		return 0, fmt.Errorf("nccl: ncclMemAlloc: NCCL %s lacks it (it came in 2.19)", l.VersionString())
	}
	var p C.uintptr_t
	r := C.nccl_mem_alloc(l.memAlloc, &p, C.size_t(bytes))
	return uintptr(p), l.err("ncclMemAlloc", Result(r), 0)
}

// MemFree is ncclMemFree.
func (l *Lib) MemFree(p uintptr) error {
	if l.memFree == nil {
		return fmt.Errorf("nccl: ncclMemFree: NCCL %s lacks it (it came in 2.19)", l.VersionString())
	}
	return l.err("ncclMemFree", Result(C.nccl_mem_free(l.memFree, C.uintptr_t(p))), 0)
}
