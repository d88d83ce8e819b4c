package org.manypy;

/** StuckModelTest's deadlines and cancels with calls handed to the interpreters' own threads. */
class DeadlinesHandoffTest extends StuckModelTest {
  @Override
  ThreadMode mode() {
    return ThreadMode.HANDOFF;
  }
}
