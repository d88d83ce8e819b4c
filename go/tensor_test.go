package manypy

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// roundTrip sends data through identity.pt as a [2, 3] tensor, copied or
// zero copy, and checks dtype, shape and elements of the result.
func roundTrip[T Element](t *testing.T, model *Object, data []T, noCopy bool) {
	t.Helper()
	var in *Tensor
	var err error
	if noCopy {
		in, err = NewTensorNoCopy(data, 2, 3)
	} else {
		in, err = NewTensor(data, 2, 3)
	}
	if err != nil {
		t.Fatalf("%s: %v", DTypeOf[T](), err)
	}
	defer in.Close()
	out := must(model.Call(bg, in)).(*Tensor)
	defer out.Close()
	if out.DType() != DTypeOf[T]() || !reflect.DeepEqual(out.Shape(), []int64{2, 3}) {
		t.Fatalf("%s came back as %v", DTypeOf[T](), out)
	}
	view := must(TensorView[T](out))
	if !reflect.DeepEqual(view, data) {
		t.Errorf("%s: got %v, want %v", DTypeOf[T](), view, data)
	}
	// Zero copy both ways: the result is Python's view of the Go slice.
	if noCopy && unsafe.SliceData(view) != unsafe.SliceData(data) {
		t.Errorf("%s: the zero-copy result is not over the Go slice", DTypeOf[T]())
	}
	if !noCopy && unsafe.SliceData(view) == unsafe.SliceData(data) {
		t.Errorf("%s: the copied tensor shares the Go slice", DTypeOf[T]())
	}
	if _, err := TensorView[complex64](out); DTypeOf[T]() != Complex64 && !errors.Is(err, ErrWrongKind) {
		t.Errorf("%s viewed as complex64: %v", DTypeOf[T](), err)
	}
}

func TestTensorsEveryDType(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "identity.pt")
	for _, noCopy := range []bool{false, true} {
		roundTrip(t, model, []float32{1, 2, 3, 4, 5, -6.5}, noCopy)
		roundTrip(t, model, []float64{1, 2, 3, 4, 5, 1e300}, noCopy)
		roundTrip(t, model, []F16{0x3c00, 0x4000, 0, 1, 2, 0xbc00}, noCopy)
		roundTrip(t, model, []BF16{0x3f80, 0x4000, 0, 1, 2, 0xbf80}, noCopy)
		roundTrip(t, model, []int8{-128, 127, 0, 1, 2, 3}, noCopy)
		roundTrip(t, model, []int16{-32768, 32767, 0, 1, 2, 3}, noCopy)
		roundTrip(t, model, []int32{-1 << 31, 1<<31 - 1, 0, 1, 2, 3}, noCopy)
		roundTrip(t, model, []int64{-1 << 63, 1<<63 - 1, 0, 1, 2, 3}, noCopy)
		roundTrip(t, model, []uint8{0, 255, 1, 2, 3, 4}, noCopy)
		roundTrip(t, model, []bool{true, false, false, true, true, false}, noCopy)
		roundTrip(t, model, []complex64{1 + 2i, 3, 4i, 0, -1, 5}, noCopy)
		roundTrip(t, model, []complex128{1 + 2i, 3, 4i, 0, -1, 5}, noCopy)
	}
}

// Python writes into a zero-copy tensor's Go slice; the slice stays pinned
// until manypy releases it, which happens once Go and Python both let go.
func TestTensorZeroCopySharesAndReleases(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	before := releasedBuffers.Load()
	data := []float32{1, 2, 3}
	in := must(NewTensorNoCopy(data))
	// Pool.Eval cannot take arguments: keep the tensor in the model's
	// namespace through identity and a method that mutates in place.
	model := loadModel(t, pool, "identity.pt")
	out := must(model.Call(bg, in)).(*Tensor)
	view := must(TensorView[float32](out))
	view[0] = 42 // the same memory as data
	if data[0] != 42 {
		t.Fatalf("the result does not share the Go slice")
	}
	in.Close()
	runtime.GC() // a moving collector would move an unpinned slice here
	if got := releasedBuffers.Load() - before; got != 0 {
		t.Fatalf("released while the result still holds it (%d)", got)
	}
	out.Close()
	if got := releasedBuffers.Load() - before; got != 1 {
		t.Fatalf("%d releases after both closed, want 1", got)
	}
	// A tensor Go forgets is released by its cleanup.
	func() { must(NewTensorNoCopy([]int64{1, 2})) }()
	deadline := time.Now().Add(5 * time.Second)
	for releasedBuffers.Load()-before != 2 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := releasedBuffers.Load() - before; got != 2 {
		t.Fatalf("an unreachable tensor was not released (%d)", got)
	}
}

func TestTensorStridedResults(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	out := must(pool.Eval(0, "__import__('torch').arange(6, dtype=__import__('torch').int64).reshape(2, 3).t()")).(*Tensor)
	defer out.Close()
	if !reflect.DeepEqual(out.Shape(), []int64{3, 2}) || !reflect.DeepEqual(out.Strides(), []int64{1, 3}) ||
		out.Contiguous() {
		t.Fatalf("layout %v %v", out.Shape(), out.Strides())
	}
	if _, err := TensorView[int64](out); !errors.Is(err, ErrBadTensor) {
		t.Errorf("view of a strided tensor: %v", err)
	}
	if got := must(TensorCopy[int64](out)); !reflect.DeepEqual(got, []int64{0, 3, 1, 4, 2, 5}) {
		t.Errorf("gathered %v", got)
	}
	scalar := must(pool.Eval(0, "__import__('torch').tensor(2.5)")).(*Tensor)
	defer scalar.Close()
	if got := must(TensorCopy[float32](scalar)); len(scalar.Shape()) != 0 || !reflect.DeepEqual(got, []float32{2.5}) {
		t.Errorf("scalar %v %v", scalar.Shape(), got)
	}
	empty := must(pool.Eval(0, "__import__('torch').zeros(0, 4)")).(*Tensor)
	defer empty.Close()
	if got := must(TensorView[float32](empty)); len(got) != 0 {
		t.Errorf("empty %v", got)
	}
}

func TestTensorBadShapesAndClosed(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "identity.pt")
	for _, shape := range [][]int64{{2, 2}, {-1, -3}, {7}, {1 << 40, 1 << 40}} {
		if _, err := NewTensor([]float32{1, 2, 3}, shape...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("shape %v: %v", shape, err)
		}
	}
	empty := must(NewTensorNoCopy([]float32{}, 0, 5))
	out := must(model.Call(bg, empty)).(*Tensor)
	if !reflect.DeepEqual(out.Shape(), []int64{0, 5}) {
		t.Errorf("empty shape %v", out.Shape())
	}
	out.Close()
	empty.Close()
	empty.Close() // idempotent
	if _, err := model.Call(bg, empty); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed tensor as argument: %v", err)
	}
	if _, err := TensorCopy[float32](empty); !errors.Is(err, ErrClosed) {
		t.Errorf("copy of a closed tensor: %v", err)
	}
}

// The bool padding mask of an nn.TransformerEncoder, from a []bool, copied
// and zero copy: the output must match eager Python's.
func TestBoolTensorEncoder(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "encoder.pt")
	src := must(NewTensor(readFloats(t, "encoder.src.bin"), 3, 7, 32))
	defer src.Close()
	rawMask := readBytes(t, "encoder.mask.bin")
	mask := make([]bool, len(rawMask))
	for i, b := range rawMask {
		mask[i] = b != 0
	}
	want := readFloats(t, "encoder.expected.out.bin")
	for _, noCopy := range []bool{false, true} {
		var m *Tensor
		if noCopy {
			m = must(NewTensorNoCopy(mask, 3, 7))
		} else {
			m = must(NewTensor(mask, 3, 7))
		}
		got := tensorFloats(t, must(model.Call(bg, src, m)))
		if err := closeTo(got, want, 1e-5); err != nil {
			t.Errorf("noCopy=%v: %v", noCopy, err)
		}
		inverted := must(model.CallMethod(bg, "invert", m)).(*Tensor)
		bools := must(TensorCopy[bool](inverted))
		for i := range bools {
			if bools[i] == mask[i] {
				t.Fatalf("invert(mask)[%d] = %v", i, bools[i])
			}
		}
		inverted.Close()
		m.Close()
	}
}

// One Tensor as the argument of many calls from many goroutines at once,
// alone (the calls' fast path) and inside other arguments: every call
// gets the Go slice itself, never a copy (identity.pt's result is that
// memory), and the slice is released once, after the last result.
func TestOneTensorSharedByConcurrentCalls(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 2})
	model := loadModel(t, pool, "identity.pt")
	before := releasedBuffers.Load()
	data := []float32{1, 2, 3, 4, 5, 6}
	x := must(NewTensorNoCopy(data, 2, 3))
	const goroutines, calls = 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				var out any
				var err error
				if i%2 == 0 {
					out, err = model.Call(bg, x)
				} else {
					out, err = model.Call(bg, Tuple{x, NewDict("again", x)})
					if err == nil {
						item := out.(Tuple)
						again, _ := item[1].(*Dict).Get("again")
						again.(*Tensor).Close()
						out = item[0]
					}
				}
				if err == nil {
					err = sameMemory(out.(*Tensor), data)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	x.Close()
	if got := releasedBuffers.Load() - before; got != 1 {
		t.Errorf("%d releases of the shared slice, want 1", got)
	}
}

// sameMemory closes out after checking that it is data's memory, shape 2x3.
func sameMemory(out *Tensor, data []float32) error {
	defer out.Close()
	view, err := TensorView[float32](out)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(out.Shape(), []int64{2, 3}) || len(view) != len(data) ||
		&view[0] != &data[0] || !reflect.DeepEqual(view, data) {
		return fmt.Errorf("a result of shape %v, %v, is not the shared slice", out.Shape(), view)
	}
	return nil
}
