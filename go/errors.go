package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Code is a manypy status code (manypy_code in manypy.h): stable and
// append-only.
type Code int

// The codes of manypy.h, with their numbers.
const (
	CodeOK                 Code = C.MANYPY_OK
	CodeInvalidArgument    Code = C.MANYPY_ERR_INVALID_ARGUMENT
	CodeOutOfRange         Code = C.MANYPY_ERR_OUT_OF_RANGE
	CodePython             Code = C.MANYPY_ERR_PYTHON
	CodeSyntax             Code = C.MANYPY_ERR_SYNTAX
	CodeUnsupportedType    Code = C.MANYPY_ERR_UNSUPPORTED_TYPE
	CodeWrongKind          Code = C.MANYPY_ERR_WRONG_KIND
	CodeStaticTLS          Code = C.MANYPY_ERR_STATIC_TLS
	CodeResourceExhausted  Code = C.MANYPY_ERR_RESOURCE_EXHAUSTED
	CodeLoader             Code = C.MANYPY_ERR_LOADER
	CodeInterpreterBroken  Code = C.MANYPY_ERR_INTERPRETER_BROKEN
	CodeInternal           Code = C.MANYPY_ERR_INTERNAL
	CodeNotFound           Code = C.MANYPY_ERR_NOT_FOUND
	CodeBadArchive         Code = C.MANYPY_ERR_BAD_ARCHIVE
	CodeNotAPackage        Code = C.MANYPY_ERR_NOT_A_PACKAGE
	CodeUnsupportedVersion Code = C.MANYPY_ERR_UNSUPPORTED_VERSION
	CodeModuleNotFound     Code = C.MANYPY_ERR_MODULE_NOT_FOUND
	CodeBadTensor          Code = C.MANYPY_ERR_BAD_TENSOR
	CodeNoSuchName         Code = C.MANYPY_ERR_NO_SUCH_NAME
	CodeDeadlineExceeded   Code = C.MANYPY_ERR_DEADLINE_EXCEEDED
	CodeCancelled          Code = C.MANYPY_ERR_CANCELLED
	CodeUntrustedArchive   Code = C.MANYPY_ERR_UNTRUSTED_ARCHIVE
	CodeOverloaded         Code = C.MANYPY_ERR_OVERLOADED
	CodeDraining           Code = C.MANYPY_ERR_DRAINING
)

// codeNames: the C names without the library (String must work before the
// library's version is checked).
var codeNames = map[Code]string{
	CodeOK: "MANYPY_OK", CodeInvalidArgument: "MANYPY_ERR_INVALID_ARGUMENT",
	CodeOutOfRange: "MANYPY_ERR_OUT_OF_RANGE", CodePython: "MANYPY_ERR_PYTHON",
	CodeSyntax: "MANYPY_ERR_SYNTAX", CodeUnsupportedType: "MANYPY_ERR_UNSUPPORTED_TYPE",
	CodeWrongKind: "MANYPY_ERR_WRONG_KIND", CodeStaticTLS: "MANYPY_ERR_STATIC_TLS",
	CodeResourceExhausted: "MANYPY_ERR_RESOURCE_EXHAUSTED", CodeLoader: "MANYPY_ERR_LOADER",
	CodeInterpreterBroken: "MANYPY_ERR_INTERPRETER_BROKEN", CodeInternal: "MANYPY_ERR_INTERNAL",
	CodeNotFound: "MANYPY_ERR_NOT_FOUND", CodeBadArchive: "MANYPY_ERR_BAD_ARCHIVE",
	CodeNotAPackage: "MANYPY_ERR_NOT_A_PACKAGE", CodeUnsupportedVersion: "MANYPY_ERR_UNSUPPORTED_VERSION",
	CodeModuleNotFound: "MANYPY_ERR_MODULE_NOT_FOUND", CodeBadTensor: "MANYPY_ERR_BAD_TENSOR",
	CodeNoSuchName: "MANYPY_ERR_NO_SUCH_NAME", CodeDeadlineExceeded: "MANYPY_ERR_DEADLINE_EXCEEDED",
	CodeCancelled: "MANYPY_ERR_CANCELLED", CodeUntrustedArchive: "MANYPY_ERR_UNTRUSTED_ARCHIVE",
	CodeOverloaded: "MANYPY_ERR_OVERLOADED", CodeDraining: "MANYPY_ERR_DRAINING",
}

// String is the code's C name, e.g. "MANYPY_ERR_PYTHON"; "MANYPY_UNKNOWN(n)"
// for a code this package does not know (a newer library's).
func (c Code) String() string {
	if name, ok := codeNames[c]; ok {
		return name
	}
	return fmt.Sprintf("MANYPY_UNKNOWN(%d)", int(c))
}

// Error is a failed manypy call. Use errors.Is with the Err* sentinels (or
// context.Canceled / context.DeadlineExceeded for stopped calls), or
// errors.As to read the fields.
//
// Its Error() is one line, so that one failure is one log line: the code's
// name and the message, as the Rust binding's Display, e.g.
// "MANYPY_ERR_PYTHON: interpreter 1: ZeroDivisionError: division by zero".
// The traceback is in Traceback, and printed by %+v (see Format).
type Error struct {
	Code    Code
	Message string // one line, e.g. "interpreter 1: ZeroDivisionError: division by zero"
	// PythonType is the exception's qualified type name when Python raised
	// ("ZeroDivisionError"), else "".
	PythonType string
	// Traceback is the formatted Python (or TorchScript) traceback, or "".
	Traceback string
	// cause is the context error of a call its context stopped.
	cause error
}

// Error is "<code>: <message>", one line (without the traceback).
func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

// Format implements fmt.Formatter: %v and %s print Error(), one line, and
// %+v adds the lines a log needs to find the failing Python code: the
// exception's type and the traceback, when there are. %#v prints the
// fields as Go syntax. Other verbs and flags apply to the Error() string
// (%q quotes it).
func (e *Error) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('+'):
		var b strings.Builder
		b.WriteString(e.Error())
		if e.PythonType != "" {
			b.WriteString("\nPython exception: " + e.PythonType)
		}
		if tb := strings.TrimRight(e.Traceback, "\n"); tb != "" {
			b.WriteString("\n" + tb)
		}
		io.WriteString(f, b.String())
	case verb == 'v' && f.Flag('#'):
		fmt.Fprintf(f, "&manypy.Error{Code:%d, Message:%q, PythonType:%q, Traceback:%q}",
			int(e.Code), e.Message, e.PythonType, e.Traceback)
	default:
		fmt.Fprintf(f, fmt.FormatString(f, verb), e.Error())
	}
}

// Is matches the sentinel of e's code, and context.Canceled or
// context.DeadlineExceeded for a call stopped by a cancel or a deadline.
func (e *Error) Is(target error) bool {
	switch target {
	case context.Canceled:
		return e.Code == CodeCancelled
	case context.DeadlineExceeded:
		return e.Code == CodeDeadlineExceeded
	}
	code, ok := target.(codeError)
	return ok && Code(code) == e.Code
}

// Unwrap gives the context's error for calls a context stopped.
func (e *Error) Unwrap() error { return e.cause }

// codeError is the type of the sentinels: errors.Is(err, ErrPython) is true
// for every *Error with CodePython.
type codeError Code

func (c codeError) Error() string { return "manypy: " + Code(c).String() }

// Sentinels, one per code, for errors.Is.
var (
	ErrInvalidArgument    error = codeError(CodeInvalidArgument)
	ErrOutOfRange         error = codeError(CodeOutOfRange)
	ErrPython             error = codeError(CodePython)
	ErrSyntax             error = codeError(CodeSyntax)
	ErrUnsupportedType    error = codeError(CodeUnsupportedType)
	ErrWrongKind          error = codeError(CodeWrongKind)
	ErrStaticTLS          error = codeError(CodeStaticTLS)
	ErrResourceExhausted  error = codeError(CodeResourceExhausted)
	ErrLoader             error = codeError(CodeLoader)
	ErrInterpreterBroken  error = codeError(CodeInterpreterBroken)
	ErrInternal           error = codeError(CodeInternal)
	ErrNotFound           error = codeError(CodeNotFound)
	ErrBadArchive         error = codeError(CodeBadArchive)
	ErrNotAPackage        error = codeError(CodeNotAPackage)
	ErrUnsupportedVersion error = codeError(CodeUnsupportedVersion)
	ErrModuleNotFound     error = codeError(CodeModuleNotFound)
	ErrBadTensor          error = codeError(CodeBadTensor)
	ErrNoSuchName         error = codeError(CodeNoSuchName)
	ErrDeadlineExceeded   error = codeError(CodeDeadlineExceeded)
	ErrCancelled          error = codeError(CodeCancelled)
	ErrUntrustedArchive   error = codeError(CodeUntrustedArchive)
	// ErrOverloaded: the pool already had PoolOptions.QueueLimit calls
	// waiting for an interpreter, so the call was refused at once and never
	// ran. Retry later, or shed the load (an HTTP service answers 503).
	ErrOverloaded error = codeError(CodeOverloaded)
	// ErrDraining: the pool is draining (Pool.Drain), so the call was
	// refused at once and never ran. Send it to another pool or process (an
	// HTTP service answers 503: it is stopping).
	ErrDraining error = codeError(CodeDraining)
)

// ErrClosed is returned by a call on a handle after its Close.
var ErrClosed = errors.New("manypy: the handle is closed")

// ErrorFor is the sentinel of a code (nil for CodeOK and unknown codes).
func ErrorFor(code Code) error {
	if _, ok := codeNames[code]; !ok || code == CodeOK {
		return nil
	}
	return codeError(code)
}

// statusError turns a C status into an *Error and frees it: the status is
// freed here and nowhere else, exactly once. nil for success.
func statusError(s *C.manypy_status) error {
	if s == nil {
		return nil
	}
	e := borrowedStatus(s)
	C.manypy_status_free(s)
	return e
}

// borrowedStatus is the *Error of a status the caller does not own (a
// callback's argument): copied, not freed.
func borrowedStatus(s *C.manypy_status) *Error {
	return &Error{
		Code:       Code(C.manypy_status_code(s)),
		Message:    C.GoString(C.manypy_status_message(s)),
		PythonType: C.GoString(C.manypy_status_python_type(s)),
		Traceback:  C.GoString(C.manypy_status_traceback(s)),
	}
}

// outOfMemory is the error of a C allocation that failed: a new *Error
// each time, as a caller may change the one it gets (errors.As).
func outOfMemory() error {
	return &Error{Code: CodeResourceExhausted, Message: "out of memory"}
}

// invalid is a Go-side misuse (a value Go cannot convert, a bad shape): an
// *Error with CodeInvalidArgument, so errors.Is(err, ErrInvalidArgument).
func invalid(format string, args ...any) error {
	return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// cCodeName is the C library's name of a code (manypy_code_name), to check
// that Code.String agrees with it.
func cCodeName(c Code) string { return C.GoString(C.manypy_code_name(C.manypy_code(c))) }
