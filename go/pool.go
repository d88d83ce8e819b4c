package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"
	"unsafe"
)

// ThreadMode is how a call reaches an interpreter (docs/threads.md).
type ThreadMode int

const (
	// Direct: the calling goroutine's OS thread enters the interpreter. The
	// fastest; Go keeps its threads, so it suits most services.
	Direct ThreadMode = C.MANYPY_THREAD_MODE_DIRECT
	// Handoff: the call runs on a thread the library owns (one per
	// interpreter) while the goroutine waits in C.
	Handoff ThreadMode = C.MANYPY_THREAD_MODE_HANDOFF
)

// AnyInterpreter lets the pool choose: a free interpreter, else the least
// loaded.
const AnyInterpreter = int(C.MANYPY_ANY_INTERPRETER)

// NoStopGrace, as PoolOptions.StopGrace, gives a stopped call no time for
// its clean-up: a stop that does not end the call at its first raise
// escalates at once and retires the interpreter. Any negative StopGrace
// means the same, as a negative net.Dialer.KeepAlive disables keep-alives.
const NoStopGrace time.Duration = -1

// PoolOptions configure NewPool. The zero value is 1 interpreter, DIRECT
// mode, 1 intra-op thread, every archive trusted, a stop grace of 100 ms,
// no queue limit.
type PoolOptions struct {
	Interpreters   int        // 1 to MaxInterpreters(); 0 means 1
	SysPath        []string   // appended to every interpreter's sys.path
	IntraOpThreads int        // torch.set_num_threads per interpreter; 0 means 1
	ThreadMode     ThreadMode // Direct (default) or Handoff
	// Trust restricts which archives the pool runs (docs/security.md):
	// with digests or a verifier, an archive it does not trust fails
	// LoadPackage with ErrUntrustedArchive before any of its Python runs.
	// The same value can serve LoadScriptTrusted.
	Trust ArchiveTrust
	// TrustedSHA256 and ArchiveVerifier add to Trust: an archive that any
	// of them trusts loads. TrustedSHA256 lists digests (64 hex digits);
	// ArchiveVerifier decides about archives not listed, as
	// ArchiveTrust.Verifier.
	TrustedSHA256   []string
	ArchiveVerifier func(sha256 [32]byte, origin string) bool
	// AllowProcessExit lets os._exit and os.abort in model code end the
	// process; by default they raise manypy.ProcessExitRefused.
	AllowProcessExit bool
	// StopGrace is how long a stopped call's clean-up (the model's finally
	// blocks and __exit__ methods) may run before the stop escalates: the
	// stop is then raised at every line, which ends the call but cuts its
	// clean-up short, and the interpreter is retired for the rest of the
	// process (package documentation, "Deadlines and cancellation";
	// Pool.CheckInterpreter). 0 means the library's default, 100 ms;
	// NoStopGrace (or any negative value) escalates at once.
	StopGrace time.Duration
	// QueueLimit is admission control: the most calls that may wait for an
	// interpreter of the pool at once (a call waits while the interpreter
	// chosen for it runs another). A call past it fails at once with
	// ErrOverloaded and never runs; refusing costs a few atomic operations
	// whatever the load, so an overloaded service answers quickly instead
	// of queueing until every request times out. Calls of every goroutine,
	// pinned or not, and Batcher requests count alike. 0 sets no limit.
	// Pool.Queued and Pool.InFlight report the load.
	QueueLimit int
	// KeepGOMAXPROCS stops NewPool from raising runtime.GOMAXPROCS. By
	// default, unless the GOMAXPROCS environment variable is set, NewPool
	// raises it to its value before the first pool plus the interpreters
	// of every pool made (never lowering it; this also ends Go's automatic
	// updates of it from the CPU quota). Goroutines in calls into Python
	// hold Ps; without spare ones the runtime hands Ps between threads
	// thousands of times a second (docs/go.md, "Long calls and the Go
	// scheduler").
	KeepGOMAXPROCS bool

	// The serving lifecycle (docs/deploy.md): serving early, growth, a
	// name for metrics, and failures of interpreters starting in the
	// background.

	// ServeEarly makes NewPool return as soon as one interpreter has
	// started; the others start in the background. Calls that may go to any
	// interpreter go only to started ones; a call pinned to one still
	// starting waits for it, within its deadline. An interpreter that fails
	// to start in the background is left broken (Stats counts it,
	// CheckInterpreter says why, OnInterpreterFailed is told) and the pool
	// serves on the others; NewPool fails only if none starts. Off by
	// default, so that a pool NewPool returns is whole; turn it on for a
	// service behind a readiness probe (Stats).
	ServeEarly bool
	// MaxInterpreters lets the pool grow by itself, one interpreter at a
	// time, up to this many, when a call has waited for an interpreter
	// longer than GrowAfter; it starts in the background while the others
	// serve. 0 means Interpreters: no growth. NewPool fails with
	// ErrOutOfRange if it is below Interpreters or above the package's
	// MaxInterpreters(). A pool never shrinks by itself (Resize does).
	MaxInterpreters int
	// GrowAfter is how long a call may wait for an interpreter before the
	// pool grows (with MaxInterpreters). 0 means the library's default,
	// 20 ms; a negative value is ErrOutOfRange.
	GrowAfter time.Duration
	// Name names the pool in its metrics: the label pool="<name>" of every
	// series of PrometheusText (and of manypyprom.ServingCollector), so that
	// several pools of a process can be told apart. "" (the default): no
	// pool label. Valid UTF-8 without NUL, else ErrInvalidArgument.
	Name string
	// OnInterpreterFailed is told when an interpreter of the pool fails to
	// start in the background (ServeEarly, or growth): its index in the
	// pool and an *Error saying why. It runs on a goroutine of its own, so
	// it may call the pool (even Close it) and may block; a panic in it is
	// recovered and reported (SetCallbackPanicHandler). It is held as long
	// as the native pool may call it: until the pool and everything loaded
	// from it (packages, objects, batchers) are closed and their last calls
	// have completed.
	OnInterpreterFailed func(index int, err error)
}

// Pool is a pool of isolated Python interpreters. Safe for concurrent use
// by any number of goroutines; Close may race calls (it frees after them).
type Pool struct {
	h       *handle
	cleanup runtime.Cleanup // the backstop, stopped by Close
	name    string
}

// MaxInterpreters is the most interpreters this process can hold at once,
// all pools together.
func MaxInterpreters() int {
	if ready() != nil {
		return 0
	}
	return int(C.manypy_max_interpreters())
}

// How long NewPool goes on collecting garbage and retrying when every
// interpreter is leased (see NewPool): while a cleanup is running, or for
// poolCreateWait after its start or after the last handle the collector
// freed, whichever is later; never more than poolCreateMaxWait in all (a
// cleanup can block, waiting for a call that never returns).
const (
	poolCreateWait    = 5 * time.Second
	poolCreateMaxWait = 60 * time.Second
)

// collectorMayFree tells whether a NewPool that started at start should
// retry. Freeing a pool's object drops its replica in each interpreter,
// which takes seconds on a loaded machine, and the runtime runs cleanups
// one at a time.
func collectorMayFree(start time.Time) bool {
	if time.Since(start) > poolCreateMaxWait {
		return false
	}
	if collecting.Load() > 0 {
		return true
	}
	last := time.Unix(0, lastCollected.Load())
	if last.Before(start) {
		last = start
	}
	return time.Since(last) < poolCreateWait
}

// NewPool creates a pool. Interpreters start on first use (each imports
// torch, about a second) and are reused by later pools.
//
// When every interpreter of the process is leased, possibly to pools that
// are garbage but not yet cleaned up, NewPool runs the garbage collector and
// retries, as long as the collector is freeing handles. It returns
// ErrResourceExhausted once five seconds pass without a cleanup running or
// freeing anything, or after a minute in all.
func NewPool(opts PoolOptions) (*Pool, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	copts, err := opts.toC()
	if err != nil {
		return nil, err
	}
	defer C.manypy_pool_options_free(copts)
	// The options own the callback from here on: freeing them (deferred
	// above) lets go of it, and the pool created from them holds it.
	if err := setOnInterpreterFailed(copts, opts.OnInterpreterFailed); err != nil {
		return nil, err
	}
	var pool *C.manypy_pool
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err = statusError(C.manypy_pool_create(copts, &pool))
		if err == nil || !isCode(err, CodeResourceExhausted) || !collectorMayFree(start) {
			break
		}
		// Unclosed pools hold interpreters until their cleanups run.
		runtime.GC()
		time.Sleep(time.Duration(min(1<<attempt, 200)) * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	p := &Pool{name: opts.Name}
	p.h, p.cleanup = adopt(p, unsafe.Pointer(pool), func(ptr unsafe.Pointer) {
		C.manypy_pool_destroy((*C.manypy_pool)(ptr))
	}, "pool")
	reserveIdlePs(&opts, max(opts.Interpreters, opts.MaxInterpreters, 1))
	return p, nil
}

func isCode(err error, code Code) bool {
	e, ok := err.(*Error)
	return ok && e.Code == code
}

func (o *PoolOptions) toC() (*C.manypy_pool_options, error) {
	copts := C.manypy_pool_options_new()
	if copts == nil {
		return nil, outOfMemory()
	}
	err := o.fill(copts)
	if err != nil {
		C.manypy_pool_options_free(copts)
		return nil, err
	}
	return copts, nil
}

func (o *PoolOptions) fill(copts *C.manypy_pool_options) error {
	count := o.Interpreters
	if count == 0 {
		count = 1
	}
	if count < 0 {
		return &Error{Code: CodeOutOfRange, Message: "interpreters must be >= 1"}
	}
	if err := statusError(C.manypy_pool_options_set_interpreters(copts, C.size_t(count))); err != nil {
		return err
	}
	if err := addEach(o.SysPath, func(dir *C.char) *C.manypy_status {
		return C.manypy_pool_options_add_sys_path(copts, dir)
	}); err != nil {
		return err
	}
	if o.IntraOpThreads != 0 {
		if err := statusError(C.manypy_pool_options_set_intra_op_threads(copts, C.int(o.IntraOpThreads))); err != nil {
			return err
		}
	}
	if err := statusError(C.manypy_pool_options_set_thread_mode(copts, C.manypy_thread_mode(o.ThreadMode))); err != nil {
		return err
	}
	trust := o.Trust.or(o.TrustedSHA256, o.ArchiveVerifier)
	if _, err := withTrust(trust, func(ctrust *C.manypy_archive_trust) (struct{}, error) {
		// Copied by the options: a verifier is shared by the copies.
		return struct{}{}, statusError(C.manypy_pool_options_set_archive_trust(copts, ctrust))
	}); err != nil {
		return err
	}
	allow := 0
	if o.AllowProcessExit {
		allow = 1
	}
	if err := statusError(C.manypy_pool_options_set_allow_process_exit(copts, C.int(allow))); err != nil {
		return err
	}
	if o.QueueLimit < 0 {
		return &Error{Code: CodeOutOfRange, Message: "the queue limit must be >= 0 (0: no limit)"}
	}
	if err := statusError(C.manypy_pool_options_set_queue_limit(copts, C.size_t(o.QueueLimit))); err != nil {
		return err
	}
	if o.StopGrace != 0 { // 0: the library's default
		if err := statusError(C.manypy_pool_options_set_stop_grace(copts, C.int64_t(stopGraceNanos(o.StopGrace)))); err != nil {
			return err
		}
	}
	return o.fillServing(copts)
}

// fillServing sets the options of the serving lifecycle but
// OnInterpreterFailed (setOnInterpreterFailed).
func (o *PoolOptions) fillServing(copts *C.manypy_pool_options) error {
	if err := statusError(C.manypy_pool_options_set_serve_early(copts, boolInt(o.ServeEarly))); err != nil {
		return err
	}
	if o.MaxInterpreters < 0 {
		return &Error{Code: CodeOutOfRange, Message: fmt.Sprintf(
			"the most interpreters must be >= 0 (0: no growth), not %d", o.MaxInterpreters)}
	}
	if err := statusError(C.manypy_pool_options_set_max_interpreters(copts, C.size_t(o.MaxInterpreters))); err != nil {
		return err
	}
	if o.GrowAfter != 0 { // 0: the library's default; C refuses a negative wait
		if err := statusError(C.manypy_pool_options_set_grow_after(copts, C.int64_t(o.GrowAfter.Nanoseconds()))); err != nil {
			return err
		}
	}
	if o.Name == "" {
		return nil
	}
	return withCStrings(func(c cStrings) error {
		return statusError(C.manypy_pool_options_set_name(copts, c[0]))
	}, o.Name)
}

// stopGraceNanos is StopGrace as the C API takes it, for a StopGrace that
// is not 0: nanoseconds, 0 (escalate at once) for any negative value.
func stopGraceNanos(grace time.Duration) int64 {
	return max(grace.Nanoseconds(), 0)
}

// interpreterIndex is an interpreter index (or AnyInterpreter) as the C API
// takes it: an int outside int32 is ErrOutOfRange, not another index.
func interpreterIndex(i int) (C.int32_t, error) {
	if i < math.MinInt32 || i > math.MaxInt32 {
		return 0, &Error{Code: CodeOutOfRange, Message: fmt.Sprintf("interpreter index %d is out of range", i)}
	}
	return C.int32_t(i), nil
}

// Close frees the pool handle. Idempotent. Packages and objects loaded from
// the pool keep its interpreters until they are closed too; closing in any
// order is safe.
func (p *Pool) Close() { closeOwned(p.h, p.cleanup) }

// Size is the number of interpreters in the pool right now (0 once
// closed): starting, ready, busy or broken; indices [0, Size()) are valid
// for pinned calls. It changes with Resize and growth
// (PoolOptions.MaxInterpreters): read it when needed rather than keeping
// it.
func (p *Pool) Size() int {
	n := 0
	_ = p.h.use(p, func(ptr unsafe.Pointer, _ cStrings) error {
		n = int(C.manypy_pool_size((*C.manypy_pool)(ptr)))
		return nil
	})
	return n
}

// Queued is the number of calls waiting for an interpreter of the pool
// right now: what PoolOptions.QueueLimit bounds. Calls made through the
// pool's packages, objects and batchers count. 0 once the pool is closed.
// For metrics (manypyprom.NewServingCollector) and for a caller that sheds
// load itself.
func (p *Pool) Queued() int {
	return p.load(func(pool *C.manypy_pool) C.size_t { return C.manypy_pool_queued(pool) })
}

// InFlight is the number of calls admitted to the pool and not yet
// complete, waiting or running. Read a moment apart from Queued (both are
// lock-free), so InFlight may be briefly below Queued. 0 once closed.
func (p *Pool) InFlight() int {
	return p.load(func(pool *C.manypy_pool) C.size_t { return C.manypy_pool_in_flight(pool) })
}

func (p *Pool) load(read func(*C.manypy_pool) C.size_t) int {
	n := 0
	_ = p.h.use(p, func(ptr unsafe.Pointer, _ cStrings) error {
		n = int(read((*C.manypy_pool)(ptr)))
		return nil
	})
	return n
}

// CheckInterpreter returns nil if interpreter i (an index in [0, Size()))
// can serve calls. Otherwise it returns an *Error: ErrInterpreterBroken,
// whose message says why (the interpreter was retired after a stopped call
// whose clean-up was cut short, see PoolOptions.StopGrace), or
// ErrOutOfRange for a bad index; ErrClosed once the pool is closed. A
// retired interpreter never serves again in this process: calls pinned to
// it fail with ErrInterpreterBroken, calls to AnyInterpreter go to the
// pool's other interpreters, and it keeps its place among the process's
// MaxInterpreters. For health checks.
func (p *Pool) CheckInterpreter(i int) error {
	return p.onInterpreter(i, func(pool *C.manypy_pool, index C.int32_t, _ cStrings) error {
		return statusError(C.manypy_pool_check_interpreter(pool, index))
	})
}

// onInterpreter is handle.use for a call on interpreter i (an index or
// AnyInterpreter), given as the C API takes it.
func (p *Pool) onInterpreter(i int, call func(pool *C.manypy_pool, index C.int32_t, c cStrings) error,
	strs ...string) error {
	index, err := interpreterIndex(i)
	if err != nil {
		return err
	}
	return p.h.use(p, func(ptr unsafe.Pointer, c cStrings) error {
		return call((*C.manypy_pool)(ptr), index, c)
	}, strs...)
}

// Exec runs Python statements in an interpreter's global namespace, which
// persists for the pool's lifetime. interpreter is an index in [0, Size())
// or AnyInterpreter.
func (p *Pool) Exec(interpreter int, source string) error {
	return p.onInterpreter(interpreter, func(pool *C.manypy_pool, index C.int32_t, c cStrings) error {
		return statusError(C.manypy_pool_exec(pool, index, c[0]))
	}, source)
}

// ExecAll runs the same statements in every interpreter, in index order,
// and stops at the first failure.
func (p *Pool) ExecAll(source string) error {
	return p.h.use(p, func(ptr unsafe.Pointer, c cStrings) error {
		return statusError(C.manypy_pool_exec_all((*C.manypy_pool)(ptr), c[0]))
	}, source)
}

// Eval evaluates one Python expression and converts its result (see the
// package documentation for the types).
func (p *Pool) Eval(interpreter int, expression string) (any, error) {
	var out *C.manypy_value
	if err := p.onInterpreter(interpreter, func(pool *C.manypy_pool, index C.int32_t, c cStrings) error {
		return statusError(C.manypy_pool_eval(pool, index, c[0], &out))
	}, expression); err != nil {
		return nil, err
	}
	return takeValue(out)
}

// ExecContext runs Python statements as Exec does, bounded by ctx as an
// object call is: its deadline and cancellation stop the statements (and a
// wait for a busy interpreter), with the errors of a stopped call, and its
// CallOptions choose the interpreter (Pinned; otherwise the pool chooses)
// and set the model and request ids that operator callbacks report.
func (p *Pool) ExecContext(ctx context.Context, source string) error {
	return p.bounded(ctx, source, func(pool *C.manypy_pool, src *C.char, opts *C.manypy_call_options) *C.manypy_status {
		return C.manypy_pool_exec_with_options(pool, src, opts)
	})
}

// EvalContext evaluates one Python expression as Eval does, bounded by ctx
// as ExecContext is (converting the result included).
func (p *Pool) EvalContext(ctx context.Context, expression string) (any, error) {
	return produced(func(out **C.manypy_value) error {
		return p.bounded(ctx, expression, func(pool *C.manypy_pool, src *C.char, opts *C.manypy_call_options) *C.manypy_status {
			return C.manypy_pool_eval_with_options(pool, src, opts, out)
		})
	}, takeValue)
}

// bounded is handle.use for a pool call that takes call options: call runs
// with the pool, source as a C string and ctx's options.
func (p *Pool) bounded(ctx context.Context, source string,
	call func(pool *C.manypy_pool, src *C.char, opts *C.manypy_call_options) *C.manypy_status) error {
	return p.h.use(p, func(ptr unsafe.Pointer, c cStrings) error {
		return bounded(ctx, func(opts *C.manypy_call_options) error {
			return statusError(call((*C.manypy_pool)(ptr), c[0], opts))
		})
	}, source)
}

// LoadPackage loads a torch.package archive from a file, read once into
// memory that every interpreter of the pool shares: changing the file
// afterwards changes nothing the package runs.
// The package keeps the pool's interpreters alive until it is closed.
func (p *Pool) LoadPackage(path string) (*Package, error) {
	return p.loadPackage(func(pool *C.manypy_pool, c cStrings, pkg **C.manypy_package) *C.manypy_status {
		return C.manypy_package_load_file(pool, c[0], pkg)
	}, path)
}

// LoadPackageBytes loads a torch.package archive from memory (copied).
func (p *Pool) LoadPackageBytes(data []byte) (*Package, error) {
	return p.loadPackage(func(pool *C.manypy_pool, _ cStrings, pkg **C.manypy_package) *C.manypy_status {
		// The C API copies the bytes during the call: no pinning needed.
		status := C.manypy_package_load_bytes(pool, unsafe.Pointer(unsafe.SliceData(data)),
			C.size_t(len(data)), pkg)
		runtime.KeepAlive(data)
		return status
	})
}

// loadPackage is the body of LoadPackage and LoadPackageBytes: load makes
// the package.
func (p *Pool) loadPackage(load func(pool *C.manypy_pool, c cStrings, pkg **C.manypy_package) *C.manypy_status,
	strs ...string) (*Package, error) {
	var pkg *C.manypy_package
	if err := p.h.use(p, func(ptr unsafe.Pointer, c cStrings) error {
		return statusError(load((*C.manypy_pool)(ptr), c, &pkg))
	}, strs...); err != nil {
		return nil, err
	}
	return newPackage(pkg), nil
}

// addEach passes each string, as a C string, to an options setter.
func addEach(items []string, add func(*C.char) *C.manypy_status) error {
	for _, item := range items {
		if err := withCStrings(func(c cStrings) error { return statusError(add(c[0])) }, item); err != nil {
			return err
		}
	}
	return nil
}
