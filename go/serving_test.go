package manypy

import (
	"fmt"
	"sync"
	"testing"
)

// ResNet-18 and python_heavy, packaged, called from 8 goroutines on a pool
// of 4 interpreters; every output is checked against eager Python's.
func TestServingFromEightGoroutines(t *testing.T) {
	pool := newPool(t, PoolOptions{Interpreters: 4})
	resnet := loadModel(t, pool, "resnet18.pt")
	heavy := loadModel(t, pool, "python_heavy.pt")
	resnetIn := must(NewTensor(readFloats(t, "resnet18.input.bin"), caseShape(t, "resnet18")...))
	defer resnetIn.Close()
	heavyIn := must(NewTensor(readFloats(t, "python_heavy.input.bin"), caseShape(t, "python_heavy")...))
	defer heavyIn.Close()
	wantResnet := readFloats(t, "resnet18.expected.out.bin")
	wantLogits := readFloats(t, "python_heavy.expected.logits.bin")
	wantNorm := readFloats(t, "python_heavy.expected.norm.bin")
	kwargs := NewDict("steps", 5, "normalize", false)

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- serveSome(g, resnet, heavy, resnetIn, heavyIn, kwargs, wantResnet, wantLogits, wantNorm)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func serveSome(g int, resnet, heavy *Object, resnetIn, heavyIn *Tensor, kwargs *Dict,
	wantResnet, wantLogits, wantNorm []float32) error {
	for i := 0; i < 12; i++ {
		if i%4 == 0 {
			out, err := resnet.Call(bg, resnetIn)
			if err != nil {
				return fmt.Errorf("goroutine %d resnet: %w", g, err)
			}
			if err := checkTensor(out, wantResnet, 1e-4); err != nil {
				return fmt.Errorf("goroutine %d resnet: %w", g, err)
			}
			continue
		}
		out, err := heavy.CallKw(bg, "", []any{heavyIn}, kwargs)
		if err != nil {
			return fmt.Errorf("goroutine %d python_heavy: %w", g, err)
		}
		d := out.(*Dict)
		logits, _ := d.Get("logits")
		norm, _ := d.Get("norm")
		steps, _ := d.Get("steps")
		if err := checkTensor(logits, wantLogits, 1e-5); err != nil {
			return fmt.Errorf("goroutine %d logits: %w", g, err)
		}
		if err := checkTensor(norm, wantNorm, 1e-5); err != nil {
			return fmt.Errorf("goroutine %d norm: %w", g, err)
		}
		if steps != int64(5) {
			return fmt.Errorf("goroutine %d: steps %v", g, steps)
		}
	}
	return nil
}

// checkTensor compares a float32 result with expected values and closes it.
func checkTensor(v any, want []float32, atol float64) error {
	tensor, ok := v.(*Tensor)
	if !ok {
		return fmt.Errorf("a %T, not a tensor", v)
	}
	defer tensor.Close()
	got, err := TensorView[float32](tensor)
	if err != nil {
		return err
	}
	return closeTo(got, want, atol)
}

// The same ResNet-18 through TorchScript on the host, no Python.
func TestScriptModuleOnTheHost(t *testing.T) {
	for _, fromBytes := range []bool{false, true} {
		var script *ScriptModule
		if fromBytes {
			script = must(LoadScriptBytes(readBytes(t, "resnet18_script.pt")))
		} else {
			script = must(LoadScript(archive(t, "resnet18_script.pt")))
		}
		in := must(NewTensor(readFloats(t, "resnet18.input.bin"), caseShape(t, "resnet18")...))
		out := must(script.Call(bg, in))
		if err := checkTensor(out, readFloats(t, "resnet18.expected.out.bin"), 1e-4); err != nil {
			t.Error(err)
		}
		in.Close()
		script.Close()
		script.Close()
		if _, err := script.Call(bg, in); err == nil {
			t.Error("a closed script module called")
		}
	}
	heavy := must(LoadScript(archive(t, "python_heavy_script.pt")))
	defer heavy.Close()
	in := must(NewTensor(readFloats(t, "python_heavy.input.bin"), 4, 64))
	defer in.Close()
	out := must(heavy.CallKw(bg, "forward", []any{in}, map[string]any{"steps": 5, "normalize": false})).(*Dict)
	logits, _ := out.Get("logits")
	if err := checkTensor(logits, readFloats(t, "python_heavy.expected.logits.bin"), 1e-5); err != nil {
		t.Error(err)
	}
	norm, _ := out.Get("norm")
	norm.(*Tensor).Close()
}
