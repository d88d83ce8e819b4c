package manypy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// The batcher's tests run batching.pt (samples/models/batching.py):
// forward(x) = x*2+1; rows(x) gives each row the batch's row count, so a
// request sees the batch it ran in; scale(x, factor); pair(x, y) returns a
// tuple with a dict and a string; drop_row(x) returns one row fewer;
// fail(x) raises ValueError.

// hangBound catches a request that never completes; no test expects
// anything to take that long (requests that must not wait for MaxWait
// have a MaxWait far above it).
const hangBound = 20 * time.Second

// longWait is a MaxWait no passing test waits for: batches in these tests
// run because they are full, or because Close sends them.
const longWait = 60 * time.Second

func newBatcher(t *testing.T, model *Object, method string, opts BatcherOptions) *Batcher {
	t.Helper()
	b := must(model.NewBatcher(method, opts))
	t.Cleanup(b.Close)
	return b
}

// rowsOf is a [rows, cols] float32 tensor whose element (r, c) is
// base + 10*r + c: each request's values are its own.
func rowsOf(t testing.TB, rows, cols int, base float32) *Tensor {
	t.Helper()
	data := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			data[r*cols+c] = base + float32(10*r+c)
		}
	}
	return must(NewTensor(data, int64(rows), int64(cols)))
}

// concurrently runs fn(0..n-1) on n goroutines that start together, and
// returns once all have returned, or fails the test after hangBound.
func concurrently(t *testing.T, n int, fn func(i int)) {
	t.Helper()
	var start, done sync.WaitGroup
	start.Add(1)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			start.Wait()
			fn(i)
		}()
	}
	start.Done()
	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(hangBound):
		t.Fatalf("%d requests did not all complete within %v", n, hangBound)
	}
}

// batchSizes checks rows' results: each request of one row sees its
// batch's row count, so a batch of k rows accounts for exactly k results
// equal to k. It returns the sizes seen.
func batchSizes(t *testing.T, sizes []float32, maxBatch int) map[int]int {
	t.Helper()
	count := map[int]int{}
	for _, s := range sizes {
		k := int(s)
		if float32(k) != s || k < 1 || k > maxBatch {
			t.Fatalf("a request saw a batch of %v rows (max %d): %v", s, maxBatch, sizes)
		}
		count[k]++
	}
	for k, n := range count {
		if n%k != 0 {
			t.Errorf("%d requests saw batches of %d rows, not a multiple of %d: %v", n, k, k, sizes)
		}
	}
	return count
}

// Many goroutines with one-row requests: the batcher stacks them (rows
// reports batches of more than one row, never more than MaxBatch), on a
// pool of 2 interpreters.
func TestBatcherStacksConcurrentRequests(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 2})
	model := loadModel(t, pool, "batching.pt")
	const maxBatch, goroutines, each = 8, 32, 4
	batcher := newBatcher(t, model, "rows", BatcherOptions{MaxBatch: maxBatch, MaxWait: 200 * time.Millisecond,
		Name: "rows_test"})
	sizes := make([]float32, goroutines*each)
	errs := make([]error, goroutines*each)
	concurrently(t, goroutines, func(g int) {
		x := rowsOf(t, 1, 3, float32(g))
		defer x.Close()
		for i := 0; i < each; i++ {
			out, err := batcher.Call(bg, x)
			if err == nil {
				var got []float32
				if got, err = floatsOf(out); err == nil && len(got) != 1 {
					err = fmt.Errorf("rows gave %v for one row", got)
				}
				if errs[g*each+i] = err; err != nil {
					continue
				}
				sizes[g*each+i] = got[0]
			} else {
				errs[g*each+i] = err
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	count := batchSizes(t, sizes, maxBatch)
	stacked := 0
	for k, n := range count {
		if k > 1 {
			stacked += n
		}
	}
	if stacked == 0 {
		t.Fatalf("no request shared a batch: %v", count)
	}
	t.Logf("requests by batch size: %v", count)
}

// Every request gets its own rows back: requests of 1 to 3 rows with
// values of their own through forward (x*2+1); a tuple with a dict and a
// string (pair) split per request, its string given to each; a batch
// dimension other than 0, whose results are strided views.
func TestBatcherResultsPerRequest(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 2})
	model := loadModel(t, pool, "batching.pt")
	forward := newBatcher(t, model, "", BatcherOptions{MaxBatch: 8, MaxWait: 20 * time.Millisecond})
	pair := newBatcher(t, model, "pair", BatcherOptions{MaxBatch: 8, MaxWait: 20 * time.Millisecond})
	const n = 24
	errs := make([]error, n)
	concurrently(t, n, func(i int) { errs[i] = checkForwardAndPair(t, forward, pair, i) })
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}

	// Batch dimension 1: requests [2, 1] make batches [2, k], and each
	// result is column i of the batch's result, a strided view.
	columns := newBatcher(t, model, "", BatcherOptions{BatchDim: 1, MaxBatch: 4, MaxWait: longWait})
	concurrently(t, 4, func(i int) {
		x := must(NewTensor([]float32{float32(i), float32(100 + i)}, 2, 1))
		defer x.Close()
		out, err := columns.Call(bg, x)
		if err != nil {
			errs[i] = err
			return
		}
		y := out.(*Tensor)
		defer y.Close()
		got := must(TensorCopy[float32](y))
		if want := []float32{float32(2*i + 1), float32(2*(100+i) + 1)}; !reflect.DeepEqual(got, want) ||
			!reflect.DeepEqual(y.Shape(), []int64{2, 1}) {
			errs[i] = fmt.Errorf("batch dim 1: %v %v, want %v [2 1]", got, y.Shape(), want)
		}
	})
	for i, err := range errs[:4] {
		if err != nil {
			t.Errorf("column %d: %v", i, err)
		}
	}
}

func checkForwardAndPair(t *testing.T, forward, pair *Batcher, i int) error {
	rows := 1 + i%3
	x := rowsOf(t, rows, 4, float32(1000*i))
	defer x.Close()
	want := must(TensorCopy[float32](x))
	for j := range want {
		want[j] = want[j]*2 + 1
	}
	out, err := forward.Call(bg, x)
	if err != nil {
		return err
	}
	y := out.(*Tensor)
	got := must(TensorCopy[float32](y))
	shape := y.Shape()
	y.Close()
	if !reflect.DeepEqual(shape, []int64{int64(rows), 4}) || !reflect.DeepEqual(got, want) {
		return fmt.Errorf("forward: %v %v, want %v", shape, got, want)
	}

	ones := must(NewTensor(make([]float32, rows*4), int64(rows), 4))
	defer ones.Close()
	out, err = pair.Call(bg, x, ones)
	if err != nil {
		return err
	}
	tuple, ok := out.(Tuple)
	if !ok || len(tuple) != 2 {
		return fmt.Errorf("pair: %#v", out)
	}
	sum := tuple[0].(*Tensor)
	defer sum.Close()
	dict := tuple[1].(*Dict)
	rowSums, _ := dict.Get("sum")
	label, _ := dict.Get("label")
	defer rowSums.(*Tensor).Close()
	xs := must(TensorCopy[float32](x))
	wantRowSums := make([]float32, rows)
	for r := 0; r < rows; r++ {
		for c := 0; c < 4; c++ {
			wantRowSums[r] += xs[r*4+c]
		}
	}
	if got := must(TensorCopy[float32](sum)); !reflect.DeepEqual(got, xs) {
		return fmt.Errorf("pair: x + y is %v, want %v", got, xs)
	}
	if got := must(TensorCopy[float32](rowSums.(*Tensor))); !reflect.DeepEqual(got, wantRowSums) {
		return fmt.Errorf("pair: sum %v, want %v", got, wantRowSums)
	}
	if label != "pair" {
		return fmt.Errorf("pair: label %#v", label)
	}
	return nil
}

// Requests that cannot share a batch do not: tensors of another width or
// dtype, and a non-tensor argument of another value, each make batches of
// their own. A mixed batch would fail to concatenate (widths), promote the
// float32 requests' results to float64 (dtypes), or scale some requests by
// the other factor.
func TestBatcherKeepsIncompatibleRequestsApart(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 2})
	model := loadModel(t, pool, "batching.pt")
	const group = 8
	type kind struct {
		cols    int
		float64 bool
	}
	kinds := []kind{{4, false}, {5, false}, {4, true}}
	input := func(k kind, i int) *Tensor {
		if k.float64 {
			data := make([]float64, k.cols)
			for c := range data {
				data[c] = float64(i*10 + c)
			}
			return must(NewTensor(data, 1, int64(k.cols)))
		}
		return rowsOf(t, 1, k.cols, float32(i*10))
	}

	// rows: every batch is exactly one group (full at MaxBatch = group).
	rows := newBatcher(t, model, "rows", BatcherOptions{MaxBatch: group, MaxWait: longWait})
	errs := make([]error, len(kinds)*group)
	concurrently(t, len(kinds)*group, func(i int) {
		x := input(kinds[i/group], i)
		defer x.Close()
		out, err := rows.Call(bg, x)
		if err != nil {
			errs[i] = err
			return
		}
		if got, err := floatsOf(out); err != nil || !reflect.DeepEqual(got, []float32{group}) {
			errs[i] = fmt.Errorf("%+v saw a batch of %v rows, want %d (%v)", kinds[i/group], got, group, err)
		}
	})

	// forward: each result keeps its request's dtype and width.
	forward := newBatcher(t, model, "", BatcherOptions{MaxBatch: group, MaxWait: longWait})
	concurrently(t, len(kinds)*group, func(i int) {
		k := kinds[i/group]
		x := input(k, i)
		defer x.Close()
		out, err := forward.Call(bg, x)
		if err != nil {
			errs[i] = errors.Join(errs[i], err)
			return
		}
		y := out.(*Tensor)
		defer y.Close()
		want := DTypeOf[float32]()
		if k.float64 {
			want = DTypeOf[float64]()
		}
		if y.DType() != want || !reflect.DeepEqual(y.Shape(), []int64{1, int64(k.cols)}) {
			errs[i] = errors.Join(errs[i], fmt.Errorf("%+v: forward gave %v", k, y))
		}
	})

	// scale: requests with factor 2 and factor 3 never share a batch.
	scale := newBatcher(t, model, "scale", BatcherOptions{MaxBatch: group, MaxWait: longWait})
	concurrently(t, 2*group, func(i int) {
		factor := float64(2 + i/group)
		x := rowsOf(t, 1, 4, float32(i*10))
		defer x.Close()
		want := must(TensorCopy[float32](x))
		for j := range want {
			want[j] *= float32(factor)
		}
		out, err := scale.Call(bg, x, factor)
		if err != nil {
			errs[i] = errors.Join(errs[i], err)
			return
		}
		if got, err := floatsOf(out); err != nil || !reflect.DeepEqual(got, want) {
			errs[i] = errors.Join(errs[i], fmt.Errorf("scale by %v: %v, want %v (%v)", factor, got, want, err))
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// A batch whose result has fewer rows than the batch (drop_row) fails every
// request with ErrBadTensor; a Python exception (fail) fails every request
// with it. The batcher, and the interpreters, serve on.
func TestBatcherErrorsFailTheWholeBatch(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 2})
	model := loadModel(t, pool, "batching.pt")
	const batch = 4
	for _, c := range []struct {
		method string
		code   Code
		python string
	}{{"drop_row", CodeBadTensor, ""}, {"fail", CodePython, "ValueError"}} {
		b := newBatcher(t, model, c.method, BatcherOptions{MaxBatch: batch, MaxWait: longWait})
		errs := make([]error, batch)
		concurrently(t, batch, func(i int) {
			x := rowsOf(t, 1, 4, float32(i))
			defer x.Close()
			out, err := b.Call(bg, x)
			if err == nil {
				errs[i] = fmt.Errorf("%s succeeded: %v", c.method, out)
				return
			}
			errs[i] = err
		})
		for _, err := range errs {
			var e *Error
			if !errors.As(err, &e) || e.Code != c.code || !errors.Is(err, ErrorFor(c.code)) {
				t.Fatalf("%s: %v, want %s", c.method, err, c.code)
			}
			if e.PythonType != c.python {
				t.Errorf("%s: Python type %q, want %q", c.method, e.PythonType, c.python)
			}
			if c.python != "" && !strings.Contains(e.Message, fmt.Sprintf("refused a batch of %d rows", batch)) {
				t.Errorf("%s: message %q", c.method, e.Message)
			}
		}
	}
	checkBatcherServes(t, model)
}

// floatsOf is tensorFloats for goroutines other than the test's: an error
// instead of t.Fatal.
func floatsOf(v any) ([]float32, error) {
	y, ok := v.(*Tensor)
	if !ok {
		return nil, fmt.Errorf("got a %T, want a *Tensor", v)
	}
	defer y.Close()
	return TensorCopy[float32](y)
}

// checkBatcherServes makes one request through a new batcher over forward.
func checkBatcherServes(t *testing.T, model *Object) {
	t.Helper()
	b := must(model.NewBatcher("", BatcherOptions{MaxWait: NoBatchWait}))
	defer b.Close()
	x := must(NewTensor([]float32{1, 2}, 1, 2))
	defer x.Close()
	if got := tensorFloats(t, must(b.Call(bg, x))); !reflect.DeepEqual(got, []float32{3, 5}) {
		t.Fatalf("forward through a new batcher: %v", got)
	}
}

// What the batcher cannot split fails at once with ErrInvalidArgument, and
// options out of range fail NewBatcher.
func TestBatcherBadInput(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "batching.pt")
	forward := newBatcher(t, model, "", BatcherOptions{MaxWait: NoBatchWait})
	pair := newBatcher(t, model, "pair", BatcherOptions{MaxWait: NoBatchWait})
	dim2 := newBatcher(t, model, "", BatcherOptions{BatchDim: 2, MaxWait: NoBatchWait})
	x := rowsOf(t, 1, 4, 0)
	defer x.Close()
	y := rowsOf(t, 2, 4, 0)
	defer y.Close()

	_, err := forward.Call(bg, 1.5) // no tensor
	expectCode(t, err, CodeInvalidArgument, "")
	_, err = forward.Call(bg) // no argument at all
	expectCode(t, err, CodeInvalidArgument, "")
	_, err = pair.Call(bg, x, y) // 1 row and 2 rows
	expectCode(t, err, CodeInvalidArgument, "")
	_, err = dim2.Call(bg, x) // no dimension 2
	expectCode(t, err, CodeInvalidArgument, "")
	_, err = forward.Call(bg, (*Tensor)(nil))
	expectCode(t, err, CodeInvalidArgument, "")
	closed := rowsOf(t, 1, 4, 0)
	closed.Close()
	if _, err = forward.Call(bg, closed); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed tensor: %v", err)
	}
	_, err = forward.CallKw(bg, []any{x}, map[string]any{"bad": make(chan int)})
	expectCode(t, err, CodeInvalidArgument, "")

	for _, opts := range []BatcherOptions{{MaxBatch: -1}, {MaxBatch: 65537}, {MaxWait: 2 * time.Minute},
		{BatchDim: -1}} {
		if _, err := model.NewBatcher("", opts); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("%+v: %v, want ErrOutOfRange", opts, err)
		}
	}
	if _, err := model.NewBatcher("", BatcherOptions{Name: "a\x00b"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a NUL in the name: %v", err)
	}
	if _, err := model.NewBatcher("no\x00such", BatcherOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a NUL in the method: %v", err)
	}
	// A method the model does not have: refused by NewBatcher or by the
	// first request, with ErrNoSuchName.
	missing, err := model.NewBatcher("no_such_method", BatcherOptions{MaxWait: NoBatchWait})
	if err == nil {
		defer missing.Close()
		_, err = missing.Call(bg, x)
	}
	if !errors.Is(err, ErrNoSuchName) {
		t.Errorf("no such method: %v", err)
	}
	// Largest and smallest settings are accepted.
	for _, opts := range []BatcherOptions{{MaxBatch: 65536, MaxWait: time.Minute}, {MaxBatch: 1, MaxWait: time.Nanosecond}} {
		b := must(model.NewBatcher("", opts))
		b.Close()
	}
}

// A request's context bounds it while it waits for its batch: a deadline
// and a cancel return at once (long before MaxWait), a context already
// done submits nothing; one stopped before its batch runs is dropped from
// it, and the batch runs for the others.
func TestBatcherContext(t *testing.T) {
	long(t, "contexts that end while requests wait for their batch")
	pool := newPool(t, PoolOptions{Interpreters: 2})
	model := loadModel(t, pool, "batching.pt")
	rows := newBatcher(t, model, "rows", BatcherOptions{MaxBatch: 4, MaxWait: longWait})
	x := rowsOf(t, 1, 4, 0)
	defer x.Close()
	pending := pendingCalls.Load()

	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	start := time.Now()
	_, err := rows.Call(ctx, x)
	cancel()
	expectStopped(t, "deadline while waiting for a batch", err, time.Since(start), hangBound,
		context.DeadlineExceeded, CodeDeadlineExceeded)

	ctx, cancel = context.WithCancel(bg)
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = rows.Call(ctx, x)
	expectStopped(t, "cancel while waiting for a batch", err, time.Since(start), hangBound,
		context.Canceled, CodeCancelled)
	if !errors.Is(err, context.Canceled) || errors.Unwrap(err) != context.Canceled {
		t.Errorf("a cancelled request unwraps to %v", errors.Unwrap(err))
	}

	_, err = rows.Call(ctx, x) // already cancelled: nothing submitted
	expectStopped(t, "cancelled before", err, 0, hangBound, context.Canceled, CodeCancelled)

	// Every outcome was taken, by its goroutine or, when the context was
	// first, by discard: none is lost or leaked.
	eventually(t, "every outcome taken", func() bool { return pendingCalls.Load() == pending })

	// A cancelled request is dropped from its batch: of three requests in
	// one batch, one cancelled, the other two run in a batch of 2 rows.
	// (MaxWait is far above the time the three take to come and the cancel,
	// even on a loaded machine under cgocheck2.)
	rows = newBatcher(t, model, "rows", BatcherOptions{MaxBatch: 4, MaxWait: 5 * time.Second})
	ctx, cancel = context.WithCancel(bg)
	dropped := make(chan error, 1)
	go func() {
		_, err := rows.Call(ctx, x)
		dropped <- err
	}()
	results := make(chan []float32, 2)
	errs := make(chan error, 2)
	request := func() {
		out, err := rows.Call(bg, x)
		if err != nil {
			errs <- err
			return
		}
		got, err := floatsOf(out)
		if err != nil {
			errs <- err
			return
		}
		results <- got
	}
	go request()
	go request()
	time.Sleep(100 * time.Millisecond) // the three wait in one batch
	cancel()
	if err := <-dropped; !errors.Is(err, context.Canceled) {
		t.Fatalf("the dropped request: %v", err)
	}
	for i := 0; i < 2; i++ {
		select {
		case got := <-results:
			if !reflect.DeepEqual(got, []float32{2}) {
				t.Errorf("a request saw a batch of %v rows, want 2", got)
			}
		case err := <-errs:
			t.Errorf("a request failed: %v", err)
		case <-time.After(hangBound):
			t.Fatal("the batch without the cancelled request never ran")
		}
	}
}

// A request stopped while its batch runs returns at once, and the batch
// runs on for the others, bound by the latest of their deadlines: stuck.pt's
// spin_torch never returns, on a batch of two [1, 2] requests (a [2, 2]
// matrix), with deadlines of 1 s and 4 s.
func TestBatcherRequestStoppedWhileItsBatchRuns(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "stuck.pt")
	spin := newBatcher(t, model, "spin_torch", BatcherOptions{MaxBatch: 2, MaxWait: longWait})
	pending := pendingCalls.Load()
	request := func(timeout time.Duration) chan error {
		done := make(chan error, 1)
		go func() {
			x := must(NewTensor([]float32{0.5, 0.25}, 1, 2))
			defer x.Close()
			ctx, cancel := context.WithTimeout(bg, timeout)
			defer cancel()
			_, err := spin.Call(ctx, x)
			done <- err
		}()
		return done
	}
	first, second := request(time.Second), request(4*time.Second)
	select {
	case err := <-first:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the request with the earlier deadline: %v", err)
		}
	case err := <-second:
		t.Fatalf("the later deadline returned first: %v", err)
	case <-time.After(hangBound):
		t.Fatal("no request returned")
	}
	select {
	case err := <-second:
		t.Fatalf("the batch stopped with the earlier deadline: %v", err)
	default:
	}
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the request with the later deadline: %v", err)
		}
	case <-time.After(hangBound):
		t.Fatal("the batch was not stopped at the later deadline")
	}
	x := must(NewTensor([]float32{1, 2}))
	defer x.Close()
	if got := tensorFloats(t, must(model.Call(bg, x))); !reflect.DeepEqual(got, []float32{2, 4}) {
		t.Errorf("the interpreter after the stopped batch: %v", got)
	}
	eventually(t, "every outcome taken", func() bool { return pendingCalls.Load() == pending })
}

// Close with requests waiting for their batch: they are sent at once and
// complete with their results (long before MaxWait); calls after Close
// fail with ErrClosed; Close is idempotent.
func TestBatcherCloseWithCallsInFlight(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 2})
	model := loadModel(t, pool, "batching.pt")
	b := must(model.NewBatcher("", BatcherOptions{MaxBatch: 64, MaxWait: longWait}))
	const n = 10
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			x := rowsOf(t, 1, 2, float32(10*i))
			defer x.Close()
			out, err := b.Call(bg, x)
			if err != nil {
				errs <- err
				return
			}
			want := []float32{float32(20*i + 1), float32(20*i + 3)}
			if got, err := floatsOf(out); err != nil || !reflect.DeepEqual(got, want) {
				errs <- fmt.Errorf("request %d: %v, want %v (%v)", i, got, want, err)
				return
			}
			errs <- nil
		}()
	}
	time.Sleep(300 * time.Millisecond) // the requests wait in their batch
	start := time.Now()
	b.Close()
	served := 0
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			switch {
			case err == nil:
				served++
			case !errors.Is(err, ErrClosed): // a request that came after Close
				t.Error(err)
			}
		case <-time.After(hangBound):
			t.Fatalf("requests waiting in a closed batcher's batch never completed (%d did)", i)
		}
	}
	if served == 0 {
		t.Fatal("no request was waiting when the batcher closed")
	}
	t.Logf("%d requests sent by Close after %v", served, time.Since(start))
	x := rowsOf(t, 1, 2, 0)
	defer x.Close()
	if _, err := b.Call(bg, x); !errors.Is(err, ErrClosed) {
		t.Errorf("a call after Close: %v", err)
	}
	b.Close()
}

// Close racing calls from 8 goroutines: every call returns a correct result
// or ErrClosed, none hangs, and each goroutine sees ErrClosed in the end.
func TestBatcherCloseRacingCalls(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 2})
	model := loadModel(t, pool, "batching.pt")
	for round := 0; round < 3; round++ {
		b := must(model.NewBatcher("", BatcherOptions{MaxBatch: 4, MaxWait: time.Millisecond}))
		var mu sync.Mutex
		calls := 0
		enough := make(chan struct{})
		var once sync.Once
		go func() {
			<-enough
			b.Close()
		}()
		concurrently(t, 8, func(g int) {
			x := rowsOf(t, 1, 2, float32(g))
			defer x.Close()
			want := []float32{float32(2*g + 1), float32(2*g + 3)}
			for {
				out, err := b.Call(bg, x)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				if got, err := floatsOf(out); err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("goroutine %d: %v, want %v (%v)", g, got, want, err)
				}
				mu.Lock()
				if calls++; calls == 40+round*13 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
		once.Do(func() { close(enough) }) // if errors ended the goroutines early
	}
}

// The batcher keeps its object, package and pool: closed first, they leave
// it serving; closed first itself, it leaves the object serving.
func TestBatcherCloseInAnyOrder(t *testing.T) {
	x := rowsOf(t, 1, 2, 1)
	defer x.Close()
	want := []float32{3, 5}
	{
		pool := must(NewPool(PoolOptions{}))
		pkg := must(pool.LoadPackage(archive(t, "batching.pt")))
		model := must(pkg.LoadPickle("model", "model.pkl"))
		b := must(model.NewBatcher("", BatcherOptions{MaxWait: NoBatchWait}))
		pool.Close()
		pkg.Close()
		model.Close()
		if got := tensorFloats(t, must(b.Call(bg, x))); !reflect.DeepEqual(got, want) {
			t.Errorf("after the pool, package and object closed: %v", got)
		}
		b.Close()
	}
	{
		pool := must(NewPool(PoolOptions{}))
		pkg := must(pool.LoadPackage(archive(t, "batching.pt")))
		model := must(pkg.LoadPickle("model", "model.pkl"))
		b := must(model.NewBatcher("", BatcherOptions{MaxWait: NoBatchWait}))
		b.Close()
		if got := tensorFloats(t, must(model.Call(bg, x))); !reflect.DeepEqual(got, want) {
			t.Errorf("the object after its batcher closed: %v", got)
		}
		model.Close()
		if _, err := model.NewBatcher("", BatcherOptions{}); !errors.Is(err, ErrClosed) {
			t.Errorf("NewBatcher on a closed object: %v", err)
		}
		pkg.Close()
		pool.Close()
	}
}
