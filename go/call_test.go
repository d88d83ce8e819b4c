package manypy

import (
	"errors"
	"testing"
)

// A call whose arguments are 1 to 4 tensors crosses to C with the tensors
// themselves (call.go); any other arguments cross as a converted tuple.
// Python must see the same call either way.
func TestCallArgumentForms(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "python_heavy.pt")
	x := must(NewTensor(readFloats(t, "python_heavy.input.bin"), 4, 64))
	defer x.Close()
	want := readFloats(t, "python_heavy.expected.logits.bin")

	byKeyword := must(model.CallKw(bg, "", []any{x}, NewDict("steps", 5, "normalize", false))).(*Dict)
	positional := must(model.Call(bg, x, 5, false)).(*Dict) // a tensor and scalars: the tuple
	for name, out := range map[string]*Dict{"keywords": byKeyword, "positional": positional} {
		logits, _ := out.Get("logits")
		if err := closeTo(tensorFloats(t, logits), want, 1e-5); err != nil {
			t.Errorf("%s: logits: %v", name, err)
		}
		for _, k := range []string{"logits", "norm"} {
			v, _ := out.Get(k)
			v.(*Tensor).Close()
		}
	}
	// Four tensors take the tensor path: steps=x fails inside forward.
	_, err := model.Call(bg, x, x, x, x)
	expectCode(t, err, CodePython, "")
	// Five take the tuple path: one argument too many for forward.
	_, err = model.Call(bg, x, x, x, x, x)
	expectCode(t, err, CodePython, "TypeError")

	closed := must(NewTensor([]float32{1}, 1))
	closed.Close()
	for _, args := range [][]any{{closed}, {x, closed}, {closed, 5}} {
		if _, err := model.Call(bg, args...); !errors.Is(err, ErrClosed) {
			t.Errorf("a closed tensor among %d arguments: %v, want ErrClosed", len(args), err)
		}
	}
	// x is still usable after calls that failed on its neighbours.
	out := must(model.CallKw(bg, "", []any{x}, NewDict("steps", 5, "normalize", false))).(*Dict)
	logits, _ := out.Get("logits")
	if err := closeTo(tensorFloats(t, logits), want, 1e-5); err != nil {
		t.Errorf("after the failed calls: %v", err)
	}
}
