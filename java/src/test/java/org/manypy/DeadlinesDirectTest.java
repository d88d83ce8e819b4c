package org.manypy;

import java.time.Duration;

/**
 * StuckModelTest's deadlines and cancels with calls run on the calling Java thread, and the default
 * stop grace.
 */
class DeadlinesDirectTest extends StuckModelTest {
  @Override
  ThreadMode mode() {
    return ThreadMode.DIRECT;
  }

  @Override
  Duration stopGrace() {
    return null; // the library's default, 100 ms
  }
}
