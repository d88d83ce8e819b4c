package manypy

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// valueDecoder builds a Go value from fuzz bytes, and the value the C round
// trip must give back (ints as int64, float32 as float64, maps as *Dict).
type valueDecoder struct {
	data []byte
	// valid is false when the value holds something the conversion must
	// refuse (a string that is not UTF-8, a uint64 past int64, too deep).
	valid bool
}

func (d *valueDecoder) byte() byte {
	if len(d.data) == 0 {
		return 0
	}
	b := d.data[0]
	d.data = d.data[1:]
	return b
}

func (d *valueDecoder) bytes() []byte {
	n := int(d.byte() % 16)
	n = min(n, len(d.data))
	out := append([]byte{}, d.data[:n]...)
	d.data = d.data[n:]
	return out
}

func (d *valueDecoder) u64() uint64 {
	var buf [8]byte
	copy(buf[:], d.bytes())
	return binary.LittleEndian.Uint64(buf[:])
}

func (d *valueDecoder) value(depth int) (in, want any) {
	// depth counts the containers around this value; a container here is
	// number depth+1, and more than maxDepth are refused.
	tooDeep := depth >= maxDepth
	switch d.byte() % 14 {
	case 0:
		return nil, nil
	case 1:
		b := d.byte()%2 == 1
		return b, b
	case 2:
		i := int64(d.u64())
		return i, i
	case 3:
		i := int32(d.u64())
		return i, int64(i)
	case 4:
		u := d.u64()
		if u > math.MaxInt64 {
			d.valid = false
		}
		return u, int64(u)
	case 5:
		f := math.Float64frombits(d.u64())
		if math.IsNaN(f) {
			f = 0 // NaN != NaN under DeepEqual
		}
		return f, f
	case 6:
		f := float32(int32(d.u64())) / 3
		return f, float64(f)
	case 7:
		s := string(d.bytes())
		if !utf8.ValidString(s) {
			d.valid = false
		}
		return s, s
	case 8:
		b := d.bytes()
		return b, b
	case 9, 10:
		d.valid = d.valid && !tooDeep
		n := int(d.byte() % 4)
		in, want := make([]any, n), make([]any, n)
		for i := range in {
			in[i], want[i] = d.value(depth + 1)
		}
		if d.byte()%2 == 0 {
			return Tuple(in), Tuple(want)
		}
		return in, want
	case 11, 12:
		d.valid = d.valid && !tooDeep
		n := int(d.byte() % 4)
		in, want := NewDict(), NewDict()
		for i := 0; i < n; i++ {
			key := string(d.bytes())
			for _, taken := in.Get(key); taken; _, taken = in.Get(key) {
				key += "+" // a repeated key would hide its first value's validity
			}
			if !utf8.ValidString(key) {
				d.valid = false
			}
			v, w := d.value(depth + 1)
			in.Set(key, v)
			want.Set(key, w)
		}
		return in, want
	default:
		// A map: sorted keys on the way in.
		d.valid = d.valid && !tooDeep
		in := map[string]any{}
		n := int(d.byte() % 3)
		for i := 0; i < n; i++ {
			in[strings.ToValidUTF8(string(d.bytes()), "?")] = int64(i)
		}
		want := NewDict()
		for _, k := range sortedKeys(in) {
			want.Set(k, in[k])
		}
		return in, want
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// FuzzValueConversion: any Go value either converts and comes back equal
// through the C API's values, or is refused with ErrInvalidArgument; never
// a crash, a hang or a leak of the partly built value.
func FuzzValueConversion(f *testing.F) {
	f.Add([]byte{9, 3, 2, 8, 1, 2, 3, 4, 5, 6, 7, 8, 7, 3, 'a', 'b', 'c'})
	f.Add([]byte{11, 2, 1, 'k', 1, 1, 2, 'k', 0, 0})
	f.Add([]byte{7, 2, 0xff, 0xfe})
	f.Add([]byte{4, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{13, 2, 1, 'b', 1, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &valueDecoder{data: data, valid: true}
		in, want := d.value(0)
		got, err := roundTripC(in)
		if !d.valid {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%#v: got %#v, %v; want ErrInvalidArgument", in, got, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%#v: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%#v came back as %#v, want %#v", in, got, want)
		}
	})
}
