package manypy

/*
#include "glue.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync/atomic"
	"unsafe"
)

// DType is a tensor's element type.
type DType int

// The dtypes manypy accepts (one lane, CPU).
const (
	Float32 DType = iota
	Float64
	Float16
	BFloat16
	Int8
	Int16
	Int32
	Int64
	Uint8
	Bool // one byte per element, 0 or 1 (torch.bool)
	Complex64
	Complex128
)

type dtypeInfo struct {
	code, bits uint8
	name       string
}

// DLPack's codes: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLComplex 5,
// and manypy's MANYPY_DL_BOOL.
var dtypes = [...]dtypeInfo{
	Float32:    {2, 32, "float32"},
	Float64:    {2, 64, "float64"},
	Float16:    {2, 16, "float16"},
	BFloat16:   {4, 16, "bfloat16"},
	Int8:       {0, 8, "int8"},
	Int16:      {0, 16, "int16"},
	Int32:      {0, 32, "int32"},
	Int64:      {0, 64, "int64"},
	Uint8:      {1, 8, "uint8"},
	Bool:       {C.MANYPY_DL_BOOL, 8, "bool"},
	Complex64:  {5, 64, "complex64"},
	Complex128: {5, 128, "complex128"},
}

func (d DType) String() string {
	if d >= 0 && int(d) < len(dtypes) {
		return dtypes[d].name
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size is the size of one element in bytes.
func (d DType) Size() int { return int(dtypes[d].bits) / 8 }

func dtypeOfDL(code, bits, lanes uint8) (DType, bool) {
	if lanes != 1 {
		return 0, false
	}
	for d, info := range dtypes {
		if info.code == code && info.bits == bits {
			return DType(d), true
		}
	}
	return 0, false
}

// F16 is an IEEE half-precision number (dtype Float16), as its bits.
type F16 uint16

// BF16 is a bfloat16 number (dtype BFloat16), as its bits.
type BF16 uint16

// Element is a Go type a tensor can hold.
type Element interface {
	float32 | float64 | F16 | BF16 | int8 | int16 | int32 | int64 | uint8 | bool |
		complex64 | complex128
}

// DTypeOf is the dtype of a Go element type.
func DTypeOf[T Element]() DType {
	var zero T
	switch any(zero).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case F16:
		return Float16
	case BF16:
		return BFloat16
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case int64:
		return Int64
	case uint8:
		return Uint8
	case bool:
		return Bool
	case complex64:
		return Complex64
	default:
		return Complex128
	}
}

// Tensor is a CPU tensor shared with Python through DLPack: made from a Go
// slice (copied or zero copy), or a call's result (zero copy). Close it when
// done; a result's memory stays valid until then. A Tensor may be passed to
// any number of calls, from any number of goroutines; calls that use it
// keep its memory alive, so closing it early is safe. Reading is safe from
// many goroutines; Close may race calls (it frees after them).
type Tensor struct {
	// h owns the *C.manypy_tensor, this Tensor's reference. Unlike other
	// owners' handles, it is part of the Tensor, one allocation less per
	// result: backstop.go says why its cleanup does not need it.
	h        handle
	backstop atomic.Pointer[runtime.Cleanup] // armed late (backstop.go), stopped by Close
	dtype    DType
	shape    []int64
	strides  []int64 // in elements
	data     unsafe.Pointer
	// dims holds shape and strides of up to 4 dimensions, which saves a
	// result tensor an allocation.
	dims [8]int64
}

// NewTensor copies data into a new tensor of the given shape (C order).
// With no shape, the tensor is one-dimensional.
func NewTensor[T Element](data []T, shape ...int64) (*Tensor, error) {
	return newTensorFromSlice(data, shape, true)
}

// NewTensorNoCopy makes a tensor over data itself: Python reads and writes
// the slice's memory. The slice is pinned (runtime.Pinner) until every
// interpreter is done with it, which may be after Close if a model kept the
// tensor.
//
// Who may write a lent slice: the model, in place (a torch tensor is always
// writable), during any call the tensor is passed to, and, if it keeps the
// tensor, later, during another call on another goroutine. Go code that
// writes the slice while a model holds it, or reads it while a model may
// write it, races with the model (the race detector does not see the
// model's writes). So data must be memory the model may change: a slice
// over memory that cannot be written, such as a syscall.Mmap with
// PROT_READ, is an error (checked on its first and last page; see
// docs/go.md), and NewTensor copies it. A writable shared mapping is lent:
// the model's writes reach its file.
func NewTensorNoCopy[T Element](data []T, shape ...int64) (*Tensor, error) {
	return newTensorFromSlice(data, shape, false)
}

func newTensorFromSlice[T Element](data []T, shape []int64, copyData bool) (*Tensor, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	if shape == nil {
		shape = []int64{int64(len(data))}
	}
	count := int64(1)
	for _, d := range shape {
		if d < 0 {
			return nil, invalid("shape %v has a negative size", shape)
		}
		if d != 0 && count > (1<<62)/d {
			return nil, invalid("shape %v has too many elements", shape)
		}
		count *= d
	}
	if count != int64(len(data)) {
		return nil, invalid("shape %v holds %d elements but the slice has %d", shape, count, len(data))
	}
	dtype := DTypeOf[T]()
	info := dtypes[dtype]
	var ptr unsafe.Pointer
	if len(data) > 0 {
		ptr = unsafe.Pointer(unsafe.SliceData(data))
	}
	size := C.size_t(len(data) * dtype.Size())
	var shapePtr *C.int64_t
	if len(shape) > 0 {
		shapePtr = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	var release cgo.Handle
	copyFlag := C.int(1)
	if !copyData && ptr != nil {
		if err := checkWritable(ptr, uintptr(size)); err != nil {
			return nil, invalid("NewTensorNoCopy: the slice's memory cannot be written (the kernel "+
				"refused to prepare it for writing: %v; a read-only mapping?), and a model may write "+
				"what it is lent: copy it with NewTensor", err)
		}
		// C keeps the pointer past this call: pin it until manypy releases
		// the buffer (mpgoReleaseBuffer unpins and deletes the handle).
		pinner := &runtime.Pinner{}
		pinner.Pin(ptr)
		release = cgo.NewHandle(pinner)
		copyFlag = 0
	}
	// On failure the C API has already run the release (unpinned).
	r := C.mpgo_tensor_from_buffer(ptr, size, C.uint8_t(info.code), C.uint8_t(info.bits),
		C.int32_t(len(shape)), shapePtr, copyFlag, C.uintptr_t(release))
	runtime.KeepAlive(data)
	runtime.KeepAlive(shape)
	return takeTensor(r)
}

// tensorOfValue takes a tensor value's tensor (zero copy).
func tensorOfValue(v *C.manypy_value) (*Tensor, error) {
	return takeTensor(C.mpgo_tensor_of_value(v))
}

// takeTensor wraps a new tensor reference, or returns its status's error.
func takeTensor(r C.mpgo_tensor_ref) (*Tensor, error) {
	if err := statusError(r.status); err != nil {
		return nil, err
	}
	return wrapTensor(r.tensor, r.dl)
}

// wrapTensor makes the Go owner of a tensor reference; dl is its layout
// (manypy_tensor_dl_tensor, C memory valid while the reference is held),
// copied here so that reading the Tensor makes no cgo call.
func wrapTensor(t *C.manypy_tensor, dl *C.DLTensor) (*Tensor, error) {
	dtype, ok := dtypeOfDL(uint8(dl.dtype.code), uint8(dl.dtype.bits), uint8(dl.dtype.lanes))
	if !ok {
		C.manypy_tensor_release(t)
		return nil, &Error{Code: CodeBadTensor, Message: fmt.Sprintf(
			"a tensor of DLPack dtype {%d, %d, %d}, unknown to this Go package",
			dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)}
	}
	ndim := int(dl.ndim)
	tensor := &Tensor{dtype: dtype, data: unsafe.Add(dl.data, uintptr(dl.byte_offset))}
	dims := tensor.dims[:]
	if 2*ndim > len(dims) {
		dims = make([]int64, 2*ndim)
	}
	shape, strides := dims[:ndim:ndim], dims[ndim:2*ndim:2*ndim]
	if ndim > 0 {
		copy(shape, unsafe.Slice((*int64)(unsafe.Pointer(dl.shape)), ndim))
		if dl.strides != nil {
			copy(strides, unsafe.Slice((*int64)(unsafe.Pointer(dl.strides)), ndim))
		} else {
			step := int64(1)
			for i := ndim - 1; i >= 0; i-- {
				strides[i] = step
				step *= shape[i]
			}
		}
	}
	tensor.shape, tensor.strides = shape, strides
	tensor.h.init(unsafe.Pointer(t), releaseTensor, "tensor")
	deferBackstop(tensor)
	return tensor, nil
}

func releaseTensor(ptr unsafe.Pointer) { C.manypy_tensor_release((*C.manypy_tensor)(ptr)) }

// Close releases the tensor's memory (when no call still uses it).
// Idempotent. Views from TensorView are invalid after it.
func (t *Tensor) Close() {
	if t.h.close() {
		t.stopBackstop()
	}
	runtime.KeepAlive(t) // across Stop, which is sure to stop it only then
}

// DType is the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Shape is the size of each dimension (a copy).
func (t *Tensor) Shape() []int64 { return append([]int64(nil), t.shape...) }

// Strides is each dimension's step, in elements (a copy).
func (t *Tensor) Strides() []int64 { return append([]int64(nil), t.strides...) }

// NumElements is the product of the shape.
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.shape {
		n *= int(d)
	}
	return n
}

// Contiguous tells whether the elements are densely in C order.
func (t *Tensor) Contiguous() bool {
	if t.NumElements() == 0 {
		return true // no element, no layout
	}
	step := int64(1)
	for i := len(t.shape) - 1; i >= 0; i-- {
		if t.shape[i] != 1 && t.strides[i] != step {
			return false
		}
		step *= t.shape[i]
	}
	return true
}

func (t *Tensor) String() string { return fmt.Sprintf("Tensor(%s, %v)", t.dtype, t.shape) }

// TensorView is the tensor's data as a Go slice over the same memory, zero
// copy: valid until t is closed (keep t reachable, e.g. with defer
// t.Close(), while using it; the garbage collector frees an unreachable
// tensor's memory). The tensor must be contiguous and of T's dtype.
func TensorView[T Element](t *Tensor) ([]T, error) {
	if err := holdAs[T](t, "viewed"); err != nil {
		return nil, err
	}
	defer t.h.release()
	if !t.Contiguous() {
		return nil, &Error{Code: CodeBadTensor, Message: "a strided tensor has no slice view: use TensorCopy"}
	}
	n := t.NumElements()
	if n == 0 {
		return []T{}, nil
	}
	return unsafe.Slice((*T)(t.data), n), nil
}

// TensorCopy copies the tensor's elements into a new slice, in C order
// (gathering a strided tensor's elements).
func TensorCopy[T Element](t *Tensor) ([]T, error) {
	if err := holdAs[T](t, "copied"); err != nil {
		return nil, err
	}
	defer t.h.release()
	out := make([]T, t.NumElements())
	if len(out) == 0 {
		return out, nil
	}
	if t.Contiguous() {
		copy(out, unsafe.Slice((*T)(t.data), len(out)))
		return out, nil
	}
	// Walk the index space in C order; each element's offset from its strides.
	index := make([]int64, len(t.shape))
	for i := range out {
		offset := int64(0)
		for d, k := range index {
			offset += k * t.strides[d]
		}
		out[i] = *(*T)(unsafe.Add(t.data, offset*int64(unsafe.Sizeof(out[0]))))
		for d := len(index) - 1; d >= 0; d-- {
			index[d]++
			if index[d] < t.shape[d] {
				break
			}
			index[d] = 0
		}
	}
	return out, nil
}

// holdAs holds t (until t.h.release) for reading it as a slice of T: an
// error, and nothing held, if t is closed or T is not its element type.
func holdAs[T Element](t *Tensor, readAs string) error {
	if _, err := t.h.acquire(); err != nil {
		return err
	}
	if want := DTypeOf[T](); want != t.dtype {
		t.h.release()
		return &Error{Code: CodeWrongKind, Message: fmt.Sprintf("a %s tensor %s as %s", t.dtype, readAs, want)}
	}
	return nil
}

// newValue is a new C value sharing the tensor's memory.
func (t *Tensor) newValue() (*C.manypy_value, error) {
	var v *C.manypy_value
	err := t.h.use(t, func(ptr unsafe.Pointer, _ cStrings) error {
		return statusError(C.manypy_value_new_tensor_ref((*C.manypy_tensor)(ptr), &v))
	})
	return v, err
}

// appendTo appends a value of the tensor to a C list or tuple.
func (t *Tensor) appendTo(seq *C.manypy_value) error {
	return t.h.use(t, func(ptr unsafe.Pointer, _ cStrings) error {
		return statusError(C.mpgo_append_tensor(seq, (*C.manypy_tensor)(ptr)))
	})
}
