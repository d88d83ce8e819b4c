package manypy

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// NewTensorNoCopy lends a slice to Python, which may write it; a slice over
// memory that cannot be written (a syscall.Mmap with PROT_READ: safe Go can
// make one) would crash the process at the model's first write. Linux says
// whether memory can be written without writing it: MADV_POPULATE_WRITE
// (Linux 5.14) faults pages in as a write would, and fails where a write
// would fault. /proc/self/maps says it too, but a process with interpreters
// has thousands of mappings to read and parse at every call; mincore says
// only whether pages are resident.

// madvPopulateWrite is Linux's MADV_POPULATE_WRITE.
const madvPopulateWrite = 23

var pageSize = uintptr(os.Getpagesize())

// populateWriteWorks tells whether the kernel knows MADV_POPULATE_WRITE
// (it fails with EINVAL both before 5.14 and for memory that cannot be
// written, so it is tried once on memory that can).
var populateWriteWorks = sync.OnceValue(func() bool {
	probe := make([]byte, 2*pageSize)
	page := (uintptr(unsafe.Pointer(&probe[0])) + pageSize - 1) &^ (pageSize - 1)
	err := madvise(page, pageSize, madvPopulateWrite)
	runtime.KeepAlive(probe)
	return err == nil
})

func madvise(addr, length uintptr, advice int) error {
	var errno syscall.Errno
	for try := 0; try < 10; try++ {
		_, _, errno = syscall.Syscall(syscall.SYS_MADVISE, addr, length, uintptr(advice))
		if errno != syscall.EINTR && errno != syscall.EAGAIN {
			break
		}
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// checkWritable returns an error when the first or last page of the size
// bytes at ptr cannot be written (pages between them are not checked: one
// mapping has one protection), and nil when they can or the kernel cannot
// tell (before Linux 5.14). For a page not yet touched, the check faults it
// in, as the model's first access would; for a writable private file
// mapping, it makes the two pages private copies, as a write would.
func checkWritable(ptr unsafe.Pointer, size uintptr) error {
	if size == 0 || !populateWriteWorks() {
		return nil
	}
	first := uintptr(ptr) &^ (pageSize - 1)
	last := (uintptr(ptr) + size - 1) &^ (pageSize - 1)
	err := madvise(first, pageSize, madvPopulateWrite)
	if err == nil && last != first {
		err = madvise(last, pageSize, madvPopulateWrite)
	}
	return err
}
