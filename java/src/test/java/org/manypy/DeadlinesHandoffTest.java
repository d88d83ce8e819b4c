package org.manypy;

import java.time.Duration;

/**
 * StuckModelTest's deadlines and cancels with calls handed to the interpreters' own threads, and a
 * stop grace set on the pool.
 */
class DeadlinesHandoffTest extends StuckModelTest {
  @Override
  ThreadMode mode() {
    return ThreadMode.HANDOFF;
  }

  @Override
  Duration stopGrace() {
    return Duration.ofMillis(250); // set on the pool
  }
}
