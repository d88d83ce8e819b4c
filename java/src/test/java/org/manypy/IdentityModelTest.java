package org.manypy;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** Suites that call identity.pt (forward(x) returns x unchanged) in a pool of one interpreter. */
abstract class IdentityModelTest {
  static Pool pool;
  static TorchPackage pkg;
  static ReplicatedObject identity;

  @BeforeAll
  static void load() {
    pool = Pool.create(1);
    pkg = pool.loadPackage(TestSupport.archive("identity.pt"));
    identity = pkg.loadPickle("model", "model.pkl");
  }

  @AfterAll
  static void close() {
    identity.close();
    pkg.close();
    pool.close();
  }
}
