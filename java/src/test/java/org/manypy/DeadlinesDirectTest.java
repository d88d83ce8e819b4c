package org.manypy;

/** StuckModelTest's deadlines and cancels with calls run on the calling Java thread. */
class DeadlinesDirectTest extends StuckModelTest {
  @Override
  ThreadMode mode() {
    return ThreadMode.DIRECT;
  }
}
