package manypy

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

// identity.pt's forward returns its argument unchanged, whatever it is: a
// round trip Go -> C -> Python -> C -> Go.
func TestValuesRoundTripThroughPython(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "identity.pt")
	cases := []struct {
		in, want any
	}{
		{nil, nil},
		{true, true},
		{false, false},
		{int64(-7), int64(-7)},
		{42, int64(42)},
		{int8(-8), int64(-8)},
		{int16(math.MinInt16), int64(math.MinInt16)},
		{int32(math.MaxInt32), int64(math.MaxInt32)},
		{uint(7), int64(7)},
		{uint8(math.MaxUint8), int64(math.MaxUint8)},
		{uint16(math.MaxUint16), int64(math.MaxUint16)},
		{uint32(math.MaxUint32), int64(math.MaxUint32)},
		{uint64(math.MaxInt64), int64(math.MaxInt64)},
		{int64(math.MinInt64), int64(math.MinInt64)},
		{2.5, 2.5},
		{float32(0.5), 0.5},
		{math.Inf(-1), math.Inf(-1)},
		{"", ""},
		{"héllo, 世界", "héllo, 世界"},
		{"a\x00b", "a\x00b"},
		{[]byte{0, 1, 255}, []byte{0, 1, 255}},
		{[]byte{}, []byte{}},
		{[]any{}, []any{}},
		{[]any{int64(1), "x", nil}, []any{int64(1), "x", nil}},
		{Tuple{int64(1), Tuple{}, []any{2.0}}, Tuple{int64(1), Tuple{}, []any{2.0}}},
		{NewDict("z", int64(1), "a", int64(2)), NewDict("z", int64(1), "a", int64(2))},
		{map[string]any{"b": true, "a": "x"}, NewDict("a", "x", "b", true)},
		// Keys with NUL reach Python whole (manypy_value_dict_set_n).
		{map[string]any{"a\x00b": int64(1), "a": int64(2), "\x00": nil},
			NewDict("\x00", nil, "a", int64(2), "a\x00b", int64(1))},
		{NewDict("k\x00", "v\x00"), NewDict("k\x00", "v\x00")},
		{Dict{}, NewDict()},
	}
	for _, c := range cases {
		got, err := model.Call(bg, c.in)
		if err != nil {
			t.Fatalf("%#v: %v", c.in, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%#v came back as %#v, want %#v", c.in, got, c.want)
		}
	}
	// NaN is not equal to itself.
	got := must(model.Call(bg, math.NaN()))
	if f, ok := got.(float64); !ok || !math.IsNaN(f) {
		t.Errorf("NaN came back as %#v", got)
	}
	// Dict order is Python's insertion order, also for keys from Python.
	d := must(pool.Eval(0, "{'b': 1, 'a': 2, 'c\\x00d': 3}")).(*Dict)
	if keys := d.Keys(); !reflect.DeepEqual(keys, []string{"b", "a", "c\x00d"}) {
		t.Errorf("keys %q", keys)
	}
}

func TestValuesGoSideErrors(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "identity.pt")
	cyclic := []any{nil}
	cyclic[0] = cyclic
	deep := any(int64(1))
	for i := 0; i < maxDepth+1; i++ {
		deep = []any{deep}
	}
	type count int // a named integer type, as any other type of the caller's
	bad := []any{
		struct{}{},
		uint64(math.MaxUint64),
		uint(math.MaxUint64),
		count(1),
		map[int]any{1: 2},
		cyclic,
		deep,
		(*Tensor)(nil),
		(*Dict)(nil),
		[]any{make(chan int)},
	}
	for _, v := range bad {
		_, err := model.Call(bg, v)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%T: got %v, want ErrInvalidArgument", v, err)
		}
	}
	// Strings must be UTF-8: the C API refuses others.
	if _, err := model.Call(bg, "\xff\xfe"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	// Keyword arguments must be a dict.
	if _, err := model.CallKw(bg, "", nil, []any{1}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("kwargs list: %v", err)
	}
	// Names with NUL cannot be C strings.
	if _, err := model.CallMethod(bg, "for\x00ward"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("method with NUL: %v", err)
	}
	// 64 containers are fine (the arguments tuple is the first); the model
	// still serves.
	ok := any(int64(1))
	for i := 0; i < maxDepth-1; i++ {
		ok = []any{ok}
	}
	if _, err := model.Call(bg, ok); err != nil {
		t.Errorf("64 deep: %v", err)
	}
}

// The C-only round trip (no Python): what the fuzz target runs.
func roundTripC(v any) (any, error) {
	cv, err := toValue(v, 0)
	if err != nil {
		return nil, err
	}
	return takeValue(cv)
}

func TestValuesRoundTripThroughC(t *testing.T) {
	in := NewDict("list", []any{int64(1), 2.5, "s", []byte("b"), nil, true},
		"tuple", Tuple{Tuple{}}, "map", map[string]any{"k": []any{}})
	out := must(roundTripC(in))
	want := NewDict("list", []any{int64(1), 2.5, "s", []byte("b"), nil, true},
		"tuple", Tuple{Tuple{}}, "map", NewDict("k", []any{}))
	if !reflect.DeepEqual(out, want) {
		t.Errorf("got %v, want %v", out, want)
	}
}
