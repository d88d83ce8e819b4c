package manypy

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"unsafe"
)

// Tuple is a Python tuple. ([]any is a list.)
type Tuple []any

// Dict is a Python dict with string keys that keeps insertion order, as
// Python's does. The zero value is an empty dict. Not safe for concurrent
// writes.
type Dict struct {
	keys   []string
	values []any
	index  map[string]int
}

// NewDict returns a dict with the given key, value pairs, in order:
// NewDict("steps", 5, "normalize", false). It panics on an odd count or a
// non-string key, as a literal would fail to compile.
func NewDict(pairs ...any) *Dict {
	if len(pairs)%2 != 0 {
		panic("manypy.NewDict: odd number of arguments")
	}
	d := &Dict{}
	for i := 0; i < len(pairs); i += 2 {
		key, ok := pairs[i].(string)
		if !ok {
			panic(fmt.Sprintf("manypy.NewDict: key %d is a %T, not a string", i/2, pairs[i]))
		}
		d.Set(key, pairs[i+1])
	}
	return d
}

// Set sets key to value; a new key goes last, an existing one keeps its
// place.
func (d *Dict) Set(key string, value any) {
	if i, ok := d.index[key]; ok {
		d.values[i] = value
		return
	}
	if d.index == nil {
		d.index = make(map[string]int)
	}
	d.index[key] = len(d.keys)
	d.keys = append(d.keys, key)
	d.values = append(d.values, value)
}

// Get returns the value of key, and whether it is present.
func (d *Dict) Get(key string) (any, bool) {
	i, ok := d.index[key]
	if !ok {
		return nil, false
	}
	return d.values[i], true
}

// Len is the number of entries.
func (d *Dict) Len() int { return len(d.keys) }

// Keys returns the keys in order (a copy).
func (d *Dict) Keys() []string { return slices.Clone(d.keys) }

// At returns the i-th entry in insertion order.
func (d *Dict) At(i int) (string, any) { return d.keys[i], d.values[i] }

func (d *Dict) String() string {
	var b strings.Builder
	b.WriteString("{")
	for i, k := range d.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %v", k, d.values[i])
	}
	b.WriteString("}")
	return b.String()
}

// maxDepth is the C API's MANYPY_VALUE_MAX_DEPTH: checked in Go too, so a
// Go value that contains itself is an error, not a stack overflow.
const maxDepth = int(C.MANYPY_VALUE_MAX_DEPTH)

// cString copies s into C memory (free with C.free). A NUL inside s cannot
// cross as a C string: that is an error, not a silent truncation.
func cString(s string) (*C.char, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, invalid("string %q contains NUL", truncate(s))
	}
	return C.CString(s), nil
}

// cStrings are the C strings of one C call (withCStrings): no C function
// this package calls takes more than two.
type cStrings [2]*C.char

// withCStrings runs fn with strs (at most two) as C strings, freed when fn
// returns. A string with a NUL fails, without running fn.
func withCStrings(fn func(c cStrings) error, strs ...string) error {
	var c cStrings
	defer c.free()
	for i, s := range strs {
		var err error
		if c[i], err = cString(s); err != nil {
			return err
		}
	}
	return fn(c)
}

func (c *cStrings) free() {
	for _, s := range c {
		if s != nil {
			C.free(unsafe.Pointer(s))
		}
	}
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// kwargsValue builds the keyword arguments dict (nil for none).
func kwargsValue(kwargs any) (*C.manypy_value, error) {
	switch kw := kwargs.(type) {
	case nil:
		return nil, nil
	case *Dict:
		if kw == nil || kw.Len() == 0 {
			return nil, nil
		}
	case Dict:
		if kw.Len() == 0 {
			return nil, nil
		}
	case map[string]any:
		if len(kw) == 0 {
			return nil, nil
		}
	default:
		return nil, invalid("keyword arguments must be a *Dict, Dict or map[string]any, not %T", kwargs)
	}
	return toValue(kwargs, 0)
}

// toValue converts a Go value to a new C value owned by the caller. depth
// counts the containers around v.
func toValue(v any, depth int) (*C.manypy_value, error) {
	var out *C.manypy_value
	switch x := v.(type) {
	case nil:
		out = C.manypy_value_new_none()
	case bool:
		b := 0
		if x {
			b = 1
		}
		out = C.manypy_value_new_bool(C.int(b))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		i, err := int64Of(x)
		if err != nil {
			return nil, err
		}
		out = C.manypy_value_new_int64(C.int64_t(i))
	case float32, float64:
		out = C.manypy_value_new_double(C.double(reflect.ValueOf(x).Float()))
	case string:
		// The bytes are copied during the call; a Go string holds no Go
		// pointers, so passing its data to C is allowed.
		err := statusError(C.manypy_value_new_string(stringData(x), C.size_t(len(x)), &out))
		if err != nil {
			return nil, err
		}
	case []byte:
		out = C.manypy_value_new_bytes(unsafe.Pointer(unsafe.SliceData(x)), C.size_t(len(x)))
	case *Tensor:
		if x == nil {
			return nil, invalid("a nil *Tensor")
		}
		return x.newValue()
	case Tuple:
		if depth >= maxDepth {
			return nil, tooDeep()
		}
		return sequenceValue(C.manypy_value_new_tuple(), x, depth+1)
	case []any:
		if depth >= maxDepth {
			return nil, tooDeep()
		}
		return sequenceValue(C.manypy_value_new_list(), x, depth+1)
	case *Dict:
		if x == nil {
			return nil, invalid("a nil *Dict")
		}
		if depth >= maxDepth {
			return nil, tooDeep()
		}
		return dictValue(x.keys, x.values, depth+1)
	case Dict:
		if depth >= maxDepth {
			return nil, tooDeep()
		}
		return dictValue(x.keys, x.values, depth+1)
	case map[string]any:
		if depth >= maxDepth {
			return nil, tooDeep()
		}
		// Sorted, so that the same map always makes the same Python dict.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		values := make([]any, len(keys))
		for i, k := range keys {
			values[i] = x[k]
		}
		return dictValue(keys, values, depth+1)
	default:
		return nil, invalid("cannot pass a %T to Python (see the package documentation for the types)", v)
	}
	if out == nil {
		return nil, outOfMemory()
	}
	return out, nil
}

// int64Of is a Go integer (one of the types toValue lists) as the int64
// Python receives: an unsigned one above MaxInt64 is an error, not a
// negative number.
func int64Of(x any) (int64, error) {
	r := reflect.ValueOf(x)
	if r.CanInt() {
		return r.Int(), nil
	}
	if u := r.Uint(); u <= math.MaxInt64 {
		return int64(u), nil
	}
	return 0, invalid("%T %d does not fit in int64", x, x)
}

func tooDeep() error {
	return invalid("a value nests more than %d containers (or contains itself)", maxDepth)
}

var emptyCString = C.CString("")

// stringData points at a Go string's bytes (never NULL, even for "").
func stringData(s string) *C.char {
	if len(s) == 0 {
		return emptyCString
	}
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s)))
}

// sequenceValue appends items to seq (a new list or tuple) and returns it;
// seq is freed on failure.
func sequenceValue(seq *C.manypy_value, items []any, depth int) (*C.manypy_value, error) {
	if seq == nil {
		return nil, outOfMemory()
	}
	for _, item := range items {
		var err error
		switch x := item.(type) {
		case *Tensor:
			// One cgo call instead of two (the common case: model inputs).
			if x == nil {
				err = invalid("a nil *Tensor")
				break
			}
			err = x.appendTo(seq)
		default:
			var child *C.manypy_value
			if child, err = toValue(item, depth); err == nil {
				err = statusError(C.manypy_value_append(seq, child)) // takes child
			}
		}
		if err != nil {
			C.manypy_value_free(seq)
			return nil, err
		}
	}
	return seq, nil
}

func dictValue(keys []string, values []any, depth int) (*C.manypy_value, error) {
	dict := C.manypy_value_new_dict()
	if dict == nil {
		return nil, outOfMemory()
	}
	for i, key := range keys {
		child, err := toValue(values[i], depth)
		if err == nil {
			// With its length: a key may contain NUL. Its bytes are copied
			// during the call (a Go string holds no Go pointers).
			err = statusError(C.manypy_value_dict_set_n(dict, stringData(key), C.size_t(len(key)), child)) // takes child
		}
		if err != nil {
			C.manypy_value_free(dict)
			return nil, err
		}
	}
	return dict, nil
}

// saveArchive is the body of Package.Save and ScriptModule.Save: save
// writes the archive of h's pointer (h owned by owner) to cpath with the
// extra files.
func saveArchive(h *handle, owner any, path string, extraFiles map[string]any,
	save func(ptr unsafe.Pointer, cpath *C.char, extra *C.manypy_value) *C.manypy_status) error {
	return h.use(owner, func(ptr unsafe.Pointer, c cStrings) error {
		extra, err := extraFilesValue(extraFiles)
		if err != nil {
			return err
		}
		defer C.manypy_value_free(extra)
		return statusError(save(ptr, c[0], extra))
	}, path)
}

// extraFilesValue builds the dict of extra files for the save functions
// (nil for none): values must be strings or []byte.
func extraFilesValue(files map[string]any) (*C.manypy_value, error) {
	if len(files) == 0 {
		return nil, nil
	}
	for name, content := range files {
		switch content.(type) {
		case string, []byte:
		default:
			return nil, invalid("extra file %q is a %T, not a string or []byte", name, content)
		}
	}
	return toValue(files, 0)
}

// produced runs produce, which makes a C value in *out, and converts the
// value with take, which frees it.
func produced[T any](produce func(out **C.manypy_value) error, take func(*C.manypy_value) (T, error)) (T, error) {
	var out *C.manypy_value
	if err := produce(&out); err != nil {
		var zero T
		return zero, err
	}
	return take(out)
}

// takeValue converts a C result to Go and frees it.
func takeValue(v *C.manypy_value) (any, error) {
	defer C.manypy_value_free(v)
	var c converter
	out, err := c.fromValue(v)
	if err != nil {
		c.closeTensors()
		return nil, err
	}
	return out, nil
}

// converter turns a C value into Go values, remembering the tensors it made
// so that a failure half-way closes them.
type converter struct {
	tensors []*Tensor
}

func (c *converter) closeTensors() {
	for _, t := range c.tensors {
		t.Close()
	}
}

func (c *converter) fromValue(v *C.manypy_value) (any, error) {
	switch C.manypy_value_get_kind(v) {
	case C.MANYPY_VALUE_NONE:
		return nil, nil
	case C.MANYPY_VALUE_BOOL:
		var b C.int
		err := statusError(C.manypy_value_get_bool(v, &b))
		return b != 0, err
	case C.MANYPY_VALUE_INT64:
		var i C.int64_t
		err := statusError(C.manypy_value_get_int64(v, &i))
		return int64(i), err
	case C.MANYPY_VALUE_DOUBLE:
		var d C.double
		err := statusError(C.manypy_value_get_double(v, &d))
		return float64(d), err
	case C.MANYPY_VALUE_STRING:
		var s *C.char
		var n C.size_t
		if err := statusError(C.manypy_value_get_string(v, &s, &n)); err != nil {
			return nil, err
		}
		return goString(s, n), nil
	case C.MANYPY_VALUE_BYTES:
		var p unsafe.Pointer
		var n C.size_t
		if err := statusError(C.manypy_value_get_bytes(v, &p, &n)); err != nil {
			return nil, err
		}
		return goBytes(p, n), nil
	case C.MANYPY_VALUE_TENSOR:
		t, err := tensorOfValue(v)
		if err != nil {
			return nil, err
		}
		c.tensors = append(c.tensors, t)
		return t, nil
	case C.MANYPY_VALUE_LIST:
		return c.items(v)
	case C.MANYPY_VALUE_TUPLE:
		items, err := c.items(v)
		return Tuple(items), err
	case C.MANYPY_VALUE_DICT:
		return c.dict(v)
	default:
		return nil, &Error{Code: CodeUnsupportedType, Message: fmt.Sprintf(
			"a value of kind %d, unknown to this Go package", int(C.manypy_value_get_kind(v)))}
	}
}

func (c *converter) items(v *C.manypy_value) ([]any, error) {
	var n C.size_t
	if err := statusError(C.manypy_value_length(v, &n)); err != nil {
		return nil, err
	}
	items := make([]any, int(n))
	for i := range items {
		var item *C.manypy_value
		if err := statusError(C.manypy_value_get_item(v, C.size_t(i), &item)); err != nil {
			return nil, err
		}
		var err error
		if items[i], err = c.fromValue(item); err != nil {
			return nil, err
		}
	}
	return items, nil
}

func (c *converter) dict(v *C.manypy_value) (*Dict, error) {
	var n C.size_t
	if err := statusError(C.manypy_value_length(v, &n)); err != nil {
		return nil, err
	}
	d := &Dict{}
	if n > 0 {
		d.keys, d.values = make([]string, 0, int(n)), make([]any, 0, int(n))
		d.index = make(map[string]int, int(n))
	}
	for i := 0; i < int(n); i++ {
		var key *C.char
		var keyLength C.size_t
		if err := statusError(C.manypy_value_dict_key(v, C.size_t(i), &key, &keyLength)); err != nil {
			return nil, err
		}
		var item *C.manypy_value
		if err := statusError(C.manypy_value_get_item(v, C.size_t(i), &item)); err != nil {
			return nil, err
		}
		value, err := c.fromValue(item)
		if err != nil {
			return nil, err
		}
		d.Set(goString(key, keyLength), value)
	}
	return d, nil
}

// takeStrings converts a C list of strings to Go and frees it.
func takeStrings(v *C.manypy_value) ([]string, error) {
	out, err := takeValue(v)
	if err != nil {
		return nil, err
	}
	items, _ := out.([]any)
	names := make([]string, 0, len(items))
	for _, item := range items {
		s, ok := item.(string)
		if !ok {
			return nil, &Error{Code: CodeWrongKind, Message: fmt.Sprintf("expected a list of strings, got a %T in it", item)}
		}
		names = append(names, s)
	}
	return names, nil
}

// takeBytes converts a C bytes value to Go and frees it.
func takeBytes(v *C.manypy_value) ([]byte, error) {
	defer C.manypy_value_free(v)
	var p unsafe.Pointer
	var n C.size_t
	if err := statusError(C.manypy_value_get_bytes(v, &p, &n)); err != nil {
		return nil, err
	}
	return goBytes(p, n), nil
}

// takeString converts a C string value to Go and frees it.
func takeString(v *C.manypy_value) (string, error) {
	defer C.manypy_value_free(v)
	var s *C.char
	var n C.size_t
	if err := statusError(C.manypy_value_get_string(v, &s, &n)); err != nil {
		return "", err
	}
	return goString(s, n), nil
}

// goString copies n bytes of C memory into a Go string (C.GoStringN takes
// an int32 length).
func goString(s *C.char, n C.size_t) string {
	if n == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(s)), int(n)))
}

// goBytes copies n bytes of C memory into a new Go slice.
func goBytes(p unsafe.Pointer, n C.size_t) []byte {
	out := make([]byte, int(n))
	if n > 0 {
		copy(out, unsafe.Slice((*byte)(p), int(n)))
	}
	return out
}
