package manypy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Who may write a lent slice (NewTensorNoCopy's documentation): hostile.pt's
// scale_in_place(x) doubles its argument in place (x.mul_(2)).

func scaleInPlace(t *testing.T, model *Object, x *Tensor) {
	t.Helper()
	out, err := model.CallMethod(bg, "scale_in_place", x)
	if err != nil || out != nil {
		t.Fatalf("scale_in_place: %v, %v", out, err)
	}
}

// A lent slice is written by the model, as documented; a copied one is not
// (the model writes the copy).
func TestNoCopyTensorIsWrittenByTheModel(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "hostile.pt")
	for _, c := range []struct {
		name      string
		newTensor func([]float32, ...int64) (*Tensor, error)
		wantSlice []float32
	}{
		{"NewTensorNoCopy", NewTensorNoCopy[float32], []float32{2, 4, 6}},
		{"NewTensor", NewTensor[float32], []float32{1, 2, 3}},
	} {
		data := []float32{1, 2, 3}
		x := must(c.newTensor(data))
		scaleInPlace(t, model, x)
		if !slices.Equal(data, c.wantSlice) {
			t.Errorf("%s: the slice holds %v after scale_in_place, want %v", c.name, data, c.wantSlice)
		}
		if got := must(TensorCopy[float32](x)); !slices.Equal(got, []float32{2, 4, 6}) {
			t.Errorf("%s: the tensor holds %v, want it doubled", c.name, got)
		}
		x.Close()
	}
}

// mapFile maps a new file holding data, with the given protection
// (MAP_SHARED), and unmaps it when the test ends.
func mapFile(t *testing.T, data []byte, prot int) (path string, mapped []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "input.bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	flag := os.O_RDONLY
	if prot&syscall.PROT_WRITE != 0 {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapped, err = syscall.Mmap(int(f.Fd()), 0, len(data), prot, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mapped) })
	return path, mapped
}

// checkMapping fails the test unless the mapping and its file hold want.
func checkMapping(t *testing.T, path string, mapped, want []byte) {
	t.Helper()
	if !slices.Equal(mapped, want) {
		t.Fatalf("the mapping holds %v, want %v", mapped, want)
	}
	if onDisk, err := os.ReadFile(path); err != nil || !slices.Equal(onDisk, want) {
		t.Fatalf("the file holds %v (%v), want %v", onDisk, err, want)
	}
}

// A slice over a PROT_READ mapping, which safe Go can make, is refused:
// lent, the model's write would be SIGSEGV. NewTensor copies it.
func TestNoCopyRefusesAReadOnlyMapping(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "hostile.pt")
	path, mapped := mapFile(t, []byte{1, 2, 3, 4}, syscall.PROT_READ)

	x, err := NewTensorNoCopy(mapped)
	if err == nil {
		scaleInPlace(t, model, x) // SIGSEGV, before the fix
		t.Fatal("NewTensorNoCopy lent a read-only mapping")
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, "NewTensor") {
		t.Fatalf("got %v, want an invalid-argument error that names NewTensor", err)
	}
	// A slice of it, ending on its first page, too.
	if _, err := NewTensorNoCopy(mapped[1:3]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a slice of the mapping: got %v", err)
	}

	y := must(NewTensor(mapped))
	defer y.Close()
	scaleInPlace(t, model, y)
	checkMapping(t, path, mapped, []byte{1, 2, 3, 4})
	if got := must(TensorCopy[uint8](y)); !slices.Equal(got, []byte{2, 4, 6, 8}) {
		t.Fatalf("the copy is %v, want it doubled", got)
	}
}

// A writable shared mapping is lent, and the model's writes reach the file.
func TestNoCopyLendsAWritableMapping(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "hostile.pt")
	path, mapped := mapFile(t, []byte{1, 2, 3, 4}, syscall.PROT_READ|syscall.PROT_WRITE)

	x := must(NewTensorNoCopy(mapped))
	defer x.Close()
	scaleInPlace(t, model, x)
	checkMapping(t, path, mapped, []byte{2, 4, 6, 8})
}

// A result is Go's alone: hostile.pt's keep(n) returns arange(n) and keeps
// it, keep_and_return_a_view(n) returns a view of one it keeps, and
// change_kept(how) then changes what it kept, in place or by giving it new
// storage. The results' memory, seen through TensorView, never changes.
// (The pool has one interpreter, whose list of kept tensors it is.)
func TestResultsTheModelKeepsNeverChange(t *testing.T) {
	pool := newPool(t, PoolOptions{})
	model := loadModel(t, pool, "hostile.pt")
	for _, how := range []string{"fill", "resize", "set", "out"} {
		kept := must(model.CallMethod(bg, "keep", 4)).(*Tensor)
		part := must(model.CallMethod(bg, "keep_and_return_a_view", 4)).(*Tensor)
		view, partView := must(TensorView[float32](kept)), must(TensorView[float32](part))
		if out := must(model.CallMethod(bg, "change_kept", how)); out != nil {
			t.Fatalf("change_kept: %v", out)
		}
		if !slices.Equal(view, []float32{0, 1, 2, 3}) || !slices.Equal(partView, []float32{1, 2, 3}) {
			t.Errorf("%s: the model changed its results: %v, %v", how, view, partView)
		}
		kept.Close()
		part.Close()
	}
}
