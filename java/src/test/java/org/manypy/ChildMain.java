package org.manypy;

import java.util.ArrayList;
import java.util.List;

/**
 * Runs in a child JVM (TestSupport.runChild) for what one JVM cannot test on
 * itself: starting without GLIBC_TUNABLES, loading a missing or mismatched
 * library, exiting with live pools. Prints one RESULT line for the parent.
 */
public final class ChildMain {
  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "static-tls" -> staticTls();
      case "load" -> load();
      case "exit-live" -> exitWithLivePools();
      default -> throw new IllegalArgumentException(args[0]);
    }
  }

  /** Creates pools of one interpreter until the process runs out of static TLS. */
  static void staticTls() {
    List<Pool> pools = new ArrayList<>();
    try {
      for (int i = 0; i < 10; ++i) {
        Pool pool = Pool.create(1);
        pools.add(pool);
        pool.exec(0, "import torch");
      }
      System.out.println("RESULT no-failure " + pools.size());
    } catch (StaticTlsException e) {
      System.out.println("RESULT static-tls after " + pools.size() + ": " + e.getMessage());
    }
  }

  static void load() {
    try {
      System.out.println("RESULT loaded " + Manypy.libraryVersion());
    } catch (LibraryLoadException e) {
      System.out.println("RESULT load-failed " + e.getMessage());
    }
  }

  /** Leaves two interpreters, an object and a callback live, and returns from main. */
  static void exitWithLivePools() {
    Pool pool = Pool.create(2);
    ReplicatedObject model =
        pool.loadPackage(TestSupport.archive("identity.pt")).loadPickle("model", "model.pkl");
    Manypy.addOpCallbacks(e -> {}, null, 1.0, false);
    Object out = model.call(Tensor.of(new float[] {1, 2}));
    System.out.println("RESULT served " + out);
  }
}
