package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"context"
	"time"
)

// CallOptions are per-call settings that travel in a context.Context
// (WithCallOptions), next to its deadline and cancellation.
type CallOptions struct {
	// Pinned pins calls to interpreter Interpreter (an index in
	// [0, Pool.Size())); otherwise the pool chooses.
	Pinned      bool
	Interpreter int
	// ModelID and RequestID are the call's context: every operator callback
	// of every operator the call runs reports them (OpEvent), and the
	// profiler aggregates by ModelID.
	ModelID   string
	RequestID string
}

type callOptionsKey struct{}

// background is context.Background(), which is comparable (an empty
// struct in an interface).
var background = context.Background()

// WithCallOptions returns a context whose calls use opts.
func WithCallOptions(ctx context.Context, opts CallOptions) context.Context {
	return context.WithValue(ctx, callOptionsKey{}, &opts)
}

// callScope is one call's C options: the context's deadline as a timeout,
// its cancellation as a cancel token, and the CallOptions.
type callScope struct {
	opts   *C.manypy_call_options // nil: no options (the fast path)
	token  *C.manypy_cancel_token
	stop   func() bool   // context.AfterFunc's
	done   chan struct{} // closed when the AfterFunc has cancelled the token
	cancel func()        // what the AfterFunc does to the token
	ctx    context.Context
}

// beginCall maps ctx onto C call options. A context already done fails at
// once with the matching *Error.
func beginCall(ctx context.Context) (callScope, error) {
	var scope callScope // a value: the fast path allocates nothing
	if ctx == nil || ctx == background {
		return scope, nil // no deadline, cancel or options: no interface calls
	}
	if err := ctx.Err(); err != nil {
		return scope, stoppedBy(err)
	}
	settings, _ := ctx.Value(callOptionsKey{}).(*CallOptions)
	deadline, hasDeadline := ctx.Deadline()
	done := ctx.Done()
	if settings == nil && !hasDeadline && done == nil {
		return scope, nil
	}
	scope.opts = C.manypy_call_options_new()
	if scope.opts == nil {
		return callScope{}, outOfMemory()
	}
	if err := scope.configure(ctx, settings, hasDeadline, deadline, done); err != nil {
		scope.end()
		return callScope{}, err
	}
	return scope, nil
}

func (s *callScope) configure(ctx context.Context, settings *CallOptions, hasDeadline bool,
	deadline time.Time, done <-chan struct{}) error {
	if settings != nil {
		if settings.Pinned {
			index, err := interpreterIndex(settings.Interpreter)
			if err != nil {
				return err
			}
			if err := statusError(C.manypy_call_options_set_interpreter(s.opts, index)); err != nil {
				return err
			}
		}
		if settings.ModelID != "" || settings.RequestID != "" {
			if err := withCStrings(func(c cStrings) error {
				return statusError(C.manypy_call_options_set_context(s.opts, c[0], c[1]))
			}, settings.ModelID, settings.RequestID); err != nil {
				return err
			}
		}
	}
	if hasDeadline {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return stoppedBy(context.DeadlineExceeded)
		}
		// The C deadline stops Python at a bytecode boundary as soon as it
		// passes, without waiting for Go's timer and the token.
		if err := statusError(C.manypy_call_options_set_timeout(s.opts, C.int64_t(remaining))); err != nil {
			return err
		}
	}
	if done != nil {
		s.token = C.manypy_cancel_token_new()
		if s.token == nil {
			return outOfMemory()
		}
		if err := statusError(C.manypy_call_options_set_cancel_token(s.opts, s.token)); err != nil {
			return err
		}
		token := s.token
		s.done = make(chan struct{})
		doneSignal := s.done
		s.ctx = ctx
		s.cancel = func() {
			// A deadline is the C deadline's to enforce (set above from the
			// same instant): cancelling too would race it and could report
			// a deadline as a cancel to Python code.
			if !hasDeadline || ctx.Err() != context.DeadlineExceeded {
				C.manypy_cancel_token_cancel(token)
			}
		}
		cancel := s.cancel
		s.stop = context.AfterFunc(ctx, func() {
			cancel()
			close(doneSignal)
		})
	}
	return nil
}

// end frees the scope's C objects, once no cancel can still use them.
func (s *callScope) end() {
	if s.stop != nil {
		if !s.stop() {
			<-s.done // the AfterFunc started: let it finish with the token
		} else if s.ctx.Err() != nil {
			// The context is done, but its AfterFunc had not started: a
			// context closes Done before it starts its AfterFuncs, and a
			// goroutine that saw Done may get here first. A request that
			// outlives the call in C (a Batcher request whose goroutine
			// stopped waiting) must still see the cancel.
			s.cancel()
		}
	}
	if s.opts != nil { // the fast path makes no cgo call here
		C.manypy_call_options_free(s.opts)
	}
	if s.token != nil {
		C.manypy_cancel_token_free(s.token)
	}
}

// bounded runs a C call that takes call options with ctx's (beginCall),
// and maps a stopped call's error onto ctx's (finish): Attr and the pool's
// ExecContext and EvalContext (invoke does the same for Object and
// ScriptModule calls).
func bounded(ctx context.Context, call func(opts *C.manypy_call_options) error) error {
	scope, err := beginCall(ctx)
	if err != nil {
		return err
	}
	err = call(scope.opts)
	scope.end()
	return finish(ctx, err)
}

// finish maps a stopped call's error onto the context's: a call the
// context's cancel (or its deadline, through Go's timer) stopped reports
// that, and unwraps to ctx.Err().
func finish(ctx context.Context, err error) error {
	e, ok := err.(*Error)
	if !ok || (e.Code != CodeCancelled && e.Code != CodeDeadlineExceeded) || ctx == nil {
		return err
	}
	if cause := ctx.Err(); cause != nil {
		e.cause = cause
		if cause == context.DeadlineExceeded {
			e.Code = CodeDeadlineExceeded
		} else {
			e.Code = CodeCancelled
		}
	}
	return err
}

// stoppedBy is the error of a call its context stopped before it started.
func stoppedBy(cause error) error { return stoppedWhen(cause, "before the call started") }

// stoppedWhen is the error of a call its context stopped, when says when.
func stoppedWhen(cause error, when string) error {
	code := CodeCancelled
	if cause == context.DeadlineExceeded {
		code = CodeDeadlineExceeded
	}
	return &Error{Code: code, Message: cause.Error() + " " + when, cause: cause}
}
