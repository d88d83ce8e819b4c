// Package manypy serves PyTorch models written in Python from Go, without a
// shared GIL: a pool of isolated CPython interpreters in the Go process,
// each with its own GIL, so N goroutines run Python model code in parallel.
// It wraps manypy's C API (manypy.h) through cgo.
//
// # Building and starting
//
// The package links libmanypy.so through pkg-config ("#cgo pkg-config:
// manypy"): set PKG_CONFIG_PATH to <prefix>/lib/pkgconfig for an install,
// or to <build>/pkgconfig for a build tree. It needs Go 1.24 or later
// (runtime.AddCleanup; runtime.Pinner is 1.21). At its first use it checks
// that the loaded library has the ABI of the header it was compiled with,
// and every call returns an ErrLoader error if not.
//
// Start the process with GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384
// in its environment: without it, the pool that asks for a sixth
// interpreter fails with ErrStaticTLS (glibc reads the setting only at
// process start; os.Setenv is too late).
//
// # Values
//
// Arguments and results cross as follows (Go → Python → Go):
//
//	nil                         None          nil
//	bool                        bool          bool
//	int, int8..int64, uint..    int           int64 (uint64 above MaxInt64: error)
//	float32, float64            float         float64
//	string (UTF-8, NUL allowed) str           string
//	[]byte                      bytes         []byte
//	*Tensor                     torch.Tensor  *Tensor (Go's alone; Close it)
//	[]any                       list          []any
//	Tuple                       tuple         Tuple
//	*Dict, Dict, map[string]any dict          *Dict (insertion order kept)
//
// A map[string]any goes in with its keys sorted. Dict keys, as strings, may
// contain NUL (they reach Python whole). Other Go types, and values
// nested more than 64 containers deep (the call's arguments tuple counts),
// are ErrInvalidArgument; a Python result of another type is
// ErrUnsupportedType.
//
// # Tensors
//
// NewTensor copies a Go slice once; NewTensorNoCopy shares it with Python,
// pinned (runtime.Pinner) until the library releases it: C never holds an
// unpinned Go pointer. A model may write any tensor it is passed, in place,
// during the call and later if it keeps it: a lent slice must be memory the
// model may change, and NewTensorNoCopy refuses memory that cannot be
// written (see its documentation). A result *Tensor is Go's alone: over
// the memory Python produced, without a copy, when nothing in the
// interpreter can reach it once the call has dropped its references (an
// identity model returns the caller's own memory), and over a copy
// otherwise (a weight read with Attr, a tensor the model keeps), so no model
// writes a result after its call returned unless Go passes it to another
// call. TensorView gives a slice over it (valid until Close), TensorCopy a
// copy. Every dtype of manypy.h is supported, bool included.
//
// # Deadlines and cancellation
//
// The context given to Object.Call (and CallMethod, CallKw, Attr,
// ScriptModule.Call, AotiModule.Call) bounds the call: its deadline becomes
// the call's C deadline, and its cancellation a C cancel token. An
// AotiModule's compiled model cannot be stopped while it runs: the context
// is checked before it starts and when it returns, and a late result is
// dropped. Running Python code is
// stopped: the interpreter raises manypy.DeadlineExceeded (or
// manypy.Cancelled), a BaseException, once, at the next line of the model's
// code, so that the clean-up it unwinds through runs (finally blocks,
// __exit__). The call returns an *Error that matches
// context.DeadlineExceeded or context.Canceled under errors.Is (and
// ErrDeadlineExceeded or ErrCancelled). A model that lets the stop end it
// leaves its interpreter serving as before. One that has not returned
// PoolOptions.StopGrace (100 ms) after the raise caught the stop or hangs in
// its clean-up: the stop escalates (it is raised at every line, which ends
// the call but cuts the clean-up short) and the interpreter is retired for
// the rest of the process. The call's message then says so; CheckInterpreter
// reports ErrInterpreterBroken with the reason; calls pinned to it fail with
// ErrInterpreterBroken, and calls to AnyInterpreter go to the pool's other
// interpreters. So a model that catches BaseException and goes on loses an
// interpreter with every stopped call: fix the model (catch Exception), and
// watch CheckInterpreter. A context shared by several calls is the Go form
// of the C API's shared cancel token.
// WithCallOptions adds per-call settings: a pinned interpreter, and the
// model and request ids that operator callbacks and the profiler see.
// Pool.ExecContext and EvalContext are bounded by their context the same
// way (Exec, ExecAll and Eval take none).
//
// # Errors
//
// Every failure of the library is an *Error with the Code, the one-line
// Message, and for Python exceptions the PythonType and Traceback. Its
// Error() is one line, the code's name and the message (as the Rust
// binding's Display):
//
//	MANYPY_ERR_PYTHON: interpreter 0: ZeroDivisionError: division by zero
//
// so that one failure is one log line; %+v adds the Python type and the
// traceback:
//
//	log.Printf("scoring: %+v", err)
//
// Each code has a sentinel (ErrPython, ErrNotFound, ...) for errors.Is, and
// errors.As gives the fields. Go-side misuse (an unsupported type, a shape
// that does not match its slice, a NUL in a name) is an *Error with
// CodeInvalidArgument; a call on a closed handle returns ErrClosed. The
// package never panics on a C failure.
//
// # Admission control and batching
//
// PoolOptions.QueueLimit bounds the calls waiting for an interpreter of a
// pool: past it a call fails at once, without running, with ErrOverloaded,
// so that an overloaded service sheds load instead of queueing it until
// every request times out. Pool.Queued and Pool.InFlight report the load.
// A Batcher (Object.NewBatcher) combines the concurrent requests of many
// goroutines into one call of a method, stacked along a batch dimension,
// and splits the result back. There is no asynchronous call form:
// goroutines are Go's.
//
// # Serving lifecycle
//
// For a service behind a load balancer (docs/deploy.md): a pool that
// serves as soon as one interpreter has started (PoolOptions.ServeEarly),
// grows when calls wait (MaxInterpreters, GrowAfter) and tells of
// interpreters that fail to start in the background (OnInterpreterFailed,
// run on a goroutine of its own); its health (Pool.Stats, for readiness
// probes: PoolStats.Serving); Pool.Resize; a graceful drain (Pool.Drain:
// new calls fail with ErrDraining while the calls in flight finish, the
// context's deadline bounding the wait); request metrics by model and code
// (Pool.RequestMetrics, Pool.PrometheusText, and manypyprom's
// ServingCollector); and Object.Share, the per-request handle a model hot
// swap takes. Pool.Size changes with growth and Resize.
//
// # Trusted archives
//
// Loading a package runs its pickles, and loading TorchScript compiles its
// code, and loading an AOTInductor package (LoadAoti) opens its compiled
// library: all run with the process's rights. An ArchiveTrust (SHA-256
// digests and a verifier) given to a pool (PoolOptions.Trust) or to
// LoadScriptTrusted, LoadAotiTrusted and their Bytes forms refuses any
// other archive with ErrUntrustedArchive before any of it runs.
// SetHostArchiveTrust sets one that every host load (LoadScript, LoadAoti,
// ...) must satisfy as well. It is a plain value: nothing to close.
//
// # Lifetimes
//
// Pool, Package, Object, Batcher, ScriptModule, AotiModule, Profiler and
// Tensor hold native handles. Close each when done: Close is idempotent, and closing
// in any order is safe (an Object keeps its package and pool alive, a
// Batcher its object). A Close that races calls on other goroutines frees
// the handle after they return, never under them (a Batcher's frees at
// once and sends the batches its requests wait in); calls that start after
// it fail with ErrClosed. A cleanup
// (runtime.AddCleanup) frees whatever is never closed, as a backstop only:
// the garbage collector does not see native memory. When every interpreter
// is leased, NewPool runs the collector and retries before it gives up.
//
// # Goroutine safety
//
//   - Pool, Package, Object, Batcher, ScriptModule, AotiModule, Profiler,
//     OpCallbacks: safe for concurrent use by any number of goroutines.
//   - Tensor: safe to pass to any number of concurrent calls and to read
//     from many goroutines; the slices of TensorView are plain memory, so
//     writes to them need the caller's own synchronisation.
//   - Dict: like a Go map, not safe for concurrent writes. A Dict or []any
//     that is only read may be passed to concurrent calls.
//   - Package-level functions (SetExportHook, SetHostArchiveTrust,
//     LoadOperatorLibrary, ...): safe from any goroutine.
//
// # Callbacks
//
// Operator callbacks (AddOpCallbacks), the API usage handler, the export
// hook and archive verifiers (ArchiveTrust.Verifier) are Go funcs called
// from C, on threads Go may not have created: the HANDOFF threads of the
// library and torch's own threads. cgo runs them as Go. A panic in one is
// recovered before it can reach C and reported to SetCallbackPanicHandler
// (by default, printed to standard error with its stack); the model's call
// goes on (a verifier that panics refuses its archive). Callbacks must be
// quick and must not call manypy. PoolOptions.OnInterpreterFailed is the
// exception: it runs on a goroutine of its own, so it may call manypy and
// block (its panics are reported the same way).
//
// # Threads
//
// In Direct mode (the default) a call runs on the calling goroutine's OS
// thread, which cgo keeps for the call. Go reuses its threads, so the
// per-thread memory the C API describes for exiting threads does not grow.
// Handoff runs calls on the library's thread per interpreter instead.
package manypy
