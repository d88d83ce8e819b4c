package org.manypy;

/** How a call reaches an interpreter (manypy_thread_mode; docs/threads.md). */
public enum ThreadMode {
  /**
   * The calling Java thread enters the interpreter itself. Fastest; a thread that exits after
   * calling leaves a few KB behind in each interpreter it used, which thread pools (the usual JVM
   * case) never pay for.
   */
  DIRECT(0),
  /**
   * Calls run on a thread the library owns (one per interpreter) while the caller waits: about 15
   * microseconds more per call, and memory stays flat however many threads come and go.
   */
  HANDOFF(1);

  final int value;

  ThreadMode(int value) {
    this.value = value;
  }
}
