package manypy_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"manypy.dev/manypy"
)

// Serve a packaged model from four interpreters: load it once, call it from
// any number of goroutines, bound each call with a context.
func Example() {
	pool, err := manypy.NewPool(manypy.PoolOptions{Interpreters: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	pkg, err := pool.LoadPackage(filepath.Join(os.Getenv("MANYPY_ARCHIVES"), "python_heavy.pt"))
	if err != nil {
		log.Fatal(err)
	}
	defer pkg.Close()
	model, err := pkg.LoadPickle("model", "model.pkl")
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()

	// From any number of goroutines:
	x, err := manypy.NewTensor(make([]float32, 4*64), 4, 64) // copied once
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ctx = manypy.WithCallOptions(ctx, manypy.CallOptions{ModelID: "heavy", RequestID: "r-1"})
	out, err := model.CallKw(ctx, "", []any{x}, manypy.NewDict("steps", 5, "normalize", false))
	if errors.Is(err, context.DeadlineExceeded) {
		log.Print("the model was stopped at the deadline; its interpreter serves on")
		return
	} else if err != nil {
		log.Fatal(err)
	}
	result := out.(*manypy.Dict)
	logits, _ := result.Get("logits")
	t := logits.(*manypy.Tensor)
	defer t.Close()
	scores, _ := manypy.TensorView[float32](t) // zero copy, valid until t.Close
	steps, _ := result.Get("steps")
	fmt.Println(t.Shape(), len(scores), steps)
	// Output: [4 10] 40 5
}
