// Command installcheck is built by go/testdata/install_build.sh against an
// installed manypy (its manypy.pc only) and run there: the version check
// passes and a pool runs Python.
package main

import (
	"fmt"
	"os"

	"manypy.dev/manypy"
)

func main() {
	pool, err := manypy.NewPool(manypy.PoolOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "installcheck:", err)
		os.Exit(1)
	}
	defer pool.Close()
	got, err := pool.Eval(0, "6 * 7")
	if err != nil || got != int64(42) {
		fmt.Fprintln(os.Stderr, "installcheck: 6 * 7 =", got, err)
		os.Exit(1)
	}
	fmt.Println("installcheck: manypy", manypy.Version(), "from Go: 6 * 7 =", got)
}
