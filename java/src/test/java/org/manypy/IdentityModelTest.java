package org.manypy;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** Suites that call identity.pt (forward(x) returns x unchanged) in a pool of one interpreter. */
abstract class IdentityModelTest {
  static Pool pool;
  static ReplicatedObject identity;

  @BeforeAll
  static void load() {
    pool = Pool.create(1);
    identity = TestSupport.loadModel(pool, "identity.pt");
  }

  @AfterAll
  static void close() {
    identity.close();
    pool.close();
  }
}
