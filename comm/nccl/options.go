package nccl

import "time"

// Option adjusts New.
type Option func(*options)

type options struct {
	lib      *Lib
	libNames []string
	bind     func() error
	maxPoll  time.Duration
	spin     time.Duration
	scratch  uintptr
	p2pA2A   bool
}

// WithLib uses an already opened library instead of loading libnccl.so.2.
func WithLib(l *Lib) Option { return func(o *options) { o.lib = l } }

// WithLibrary opens NCCL from these names or paths instead of libnccl.so.2.
func WithLibrary(names ...string) Option {
	return func(o *options) { o.libNames = append([]string(nil), names...) }
}

// WithThreadSetup runs fn once on each communicator's NCCL thread before any NCCL call
// there: it must make the rank's CUDA context current (cuCtxSetCurrent), since NCCL
// binds a communicator to the device current when it is made. Split communicators run
// it on their own threads too.
func WithThreadSetup(fn func() error) Option { return func(o *options) { o.bind = fn } }

// WithMaxPoll sets the longest sleep between the watchdog's polls (default 200µs).
func WithMaxPoll(d time.Duration) Option { return func(o *options) { o.maxPoll = d } }

// WithSpin sets how long the watchdog polls an operation without sleeping (default
// 2ms; negative: sleep from the first polls on), trading a busy CPU core for prompt
// completion.
func WithSpin(d time.Duration) Option { return func(o *options) { o.spin = d } }

// WithBarrierBuffer gives Barrier a device buffer of at least 4 bytes for its one-element
// all-reduce. Without it, New allocates one with ncclMemAlloc (NCCL 2.19 and later).
func WithBarrierBuffer(devicePtr uintptr) Option { return func(o *options) { o.scratch = devicePtr } }

// WithP2PAllToAll makes AllToAll a group of ncclSend/ncclRecv even where the library
// has ncclAlltoAll (2.28.3), to compare the two or to work around either.
func WithP2PAllToAll() Option { return func(o *options) { o.p2pA2A = true } }
