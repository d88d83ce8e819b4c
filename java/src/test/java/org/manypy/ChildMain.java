package org.manypy;

import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Runs in a child JVM (TestSupport.runChild) for what one JVM cannot test on itself: starting
 * without GLIBC_TUNABLES, loading a missing or mismatched library, exiting with live pools. Prints
 * one RESULT line for the parent.
 */
public final class ChildMain {
  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "static-tls" -> staticTls();
      case "interpreter-failed" -> interpreterFailed();
      case "interpreter-failed-after-close" -> interpreterFailedAfterClose();
      case "load" -> load();
      case "exit-live" -> exitWithLivePools();
      case "exit-async" -> exitWithAsyncCallsInFlight();
      case "extract" -> extract(args[1], args[2]);
      case "load-bundled" -> loadBundled(args[1], args[2]);
      default -> throw new IllegalArgumentException(args[0]);
    }
  }

  /** Creates pools of one interpreter until the process runs out of static TLS. */
  static void staticTls() {
    List<Pool> pools = new ArrayList<>();
    try {
      for (int i = 0; i < Manypy.maxInterpreters(); ++i) {
        Pool pool = Pool.create(1);
        pools.add(pool);
        pool.exec(0, "import torch");
      }
      System.out.println("RESULT no-failure " + pools.size());
    } catch (StaticTlsException e) {
      System.out.println("RESULT static-tls after " + pools.size() + ": " + e.getMessage());
    }
  }

  /**
   * A serve-early pool of the process's 15 interpreters (more than glibc's default room holds on
   * any torch: 5 on torch 1.13, 14 on torch 2.x) in a JVM started without the static TLS setting:
   * those past glibc's default room fail to start in the background, and the pool's callback, which
   * throws, is told of each on a manypy thread. Prints what it was told and the pool's state once
   * nothing is starting.
   */
  static void interpreterFailed() {
    List<String> told = java.util.Collections.synchronizedList(new ArrayList<>());
    List<Throwable> reported = java.util.Collections.synchronizedList(new ArrayList<>());
    Manypy.setCallbackErrorHandler(reported::add);
    int n = Manypy.maxInterpreters();
    PoolOptions options =
        new PoolOptions()
            .interpreters(n)
            .serveEarly(true)
            .onInterpreterFailed(
                (interpreter, why) -> {
                  Thread thread = Thread.currentThread();
                  told.add(
                      interpreter
                          + ":"
                          + why.code()
                          + ":"
                          + thread.getName()
                          + ":"
                          + thread.isDaemon());
                  if (!why.getMessage().contains("GLIBC_TUNABLES"))
                    told.add("message: " + why.getMessage());
                  throw new IllegalStateException("thrown by the callback for " + interpreter);
                });
    try (Pool pool = Pool.create(options)) {
      long end = System.nanoTime() + 300_000_000_000L;
      while (pool.stats().starting() > 0 && System.nanoTime() < end) sleep(20);
      PoolStats stats = pool.stats();
      // The callback runs just after an interpreter is counted broken, on
      // another thread: the last ones may still be on their way.
      while (reported.size() < stats.broken() && System.nanoTime() < end) sleep(20);
      // What failed is broken; the pool serves on the others.
      String broken = "";
      for (int i = 0; i < n; ++i) {
        try {
          pool.checkInterpreter(i);
        } catch (InterpreterBrokenException e) {
          broken +=
              " "
                  + i
                  + (e.getMessage().contains("GLIBC_TUNABLES")
                      ? ":static-tls"
                      : ":" + e.getMessage());
        }
      }
      System.out.println(
          "RESULT interpreters="
              + n
              + " up="
              + (stats.ready() + stats.busy())
              + " broken="
              + stats.broken()
              + " starting="
              + stats.starting()
              + " served="
              + pool.eval("6 * 7")
              + " told="
              + told
              + " reported="
              + reported.size()
              + " checked="
              + broken.trim().replace(' ', ','));
    }
  }

  /**
   * A pool of one interpreter that may grow to 8 (or the process's limit), in a JVM started without
   * the static TLS setting, given 150 asynchronous calls of stuck.pt's sleep(0.2) and then closed
   * (pool, package and object) at once: the calls hold the native pool, and their waits make it
   * grow, one interpreter at a time (about a second each), so those past glibc's default room fail
   * to start after every Java handle of the pool was closed. Prints what the callback was told,
   * whether each report came after the close, whether every call succeeded, and the glue's count of
   * callbacks held once the calls are done (the callback released).
   */
  static void interpreterFailedAfterClose() throws Exception {
    List<String> told = java.util.Collections.synchronizedList(new ArrayList<>());
    java.util.concurrent.atomic.AtomicBoolean closed =
        new java.util.concurrent.atomic.AtomicBoolean();
    int n = Manypy.maxInterpreters(); // loads the library
    long heldBefore =
        org.manypy.internal.ManypyNative.manypy_jni_interpreter_failed_callbacks_held();
    PoolOptions options =
        new PoolOptions()
            .interpreters(1)
            .maxInterpreters(n)
            .growAfter(java.time.Duration.ofMillis(1))
            .onInterpreterFailed(
                (interpreter, why) ->
                    told.add(
                        interpreter
                            + ":"
                            + why.code()
                            + ":"
                            + (closed.get() ? "after-close" : "before-close")));
    List<java.util.concurrent.CompletableFuture<Object>> calls = new ArrayList<>();
    try (Pool pool = Pool.create(options);
        TorchPackage pkg = pool.loadPackage(TestSupport.archive("stuck.pt"));
        ReplicatedObject stuck = pkg.loadPickle("model", "model.pkl")) {
      for (int i = 0; i < 150; ++i) calls.add(stuck.callMethodAsync("sleep", 0.2));
    }
    closed.set(true);
    // Nothing Java holds of the pool may matter: collect what is unreachable.
    System.gc();
    long held = org.manypy.internal.ManypyNative.manypy_jni_interpreter_failed_callbacks_held();
    int ok = 0;
    for (var call : calls) {
      if (Double.valueOf(0.2).equals(call.get(300, java.util.concurrent.TimeUnit.SECONDS))) ++ok;
    }
    // The last call's completion lets go of the pool, which then releases the callback.
    long end = System.nanoTime() + 60_000_000_000L;
    while (org.manypy.internal.ManypyNative.manypy_jni_interpreter_failed_callbacks_held()
            > heldBefore
        && System.nanoTime() < end) {
      sleep(10);
    }
    System.out.println(
        "RESULT interpreters="
            + n
            + " heldAfterClose="
            + (held - heldBefore)
            + " ok="
            + ok
            + " heldAtEnd="
            + (org.manypy.internal.ManypyNative.manypy_jni_interpreter_failed_callbacks_held()
                - heldBefore)
            + " told="
            + told);
  }

  static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      throw new IllegalStateException(e);
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

  /**
   * Returns from main with asynchronous calls running (stuck.pt's spin() on both interpreters,
   * which never returns) and 200 queued behind them, whose completions never come.
   */
  static void exitWithAsyncCallsInFlight() throws Exception {
    Pool pool = Pool.create(2);
    ReplicatedObject model =
        pool.loadPackage(TestSupport.archive("stuck.pt")).loadPickle("model", "model.pkl");
    Object served =
        model
            .callAsync(Tensor.of(new float[] {1, 2}))
            .thenApply(String::valueOf)
            .get(120, java.util.concurrent.TimeUnit.SECONDS);
    for (int i = 0; i < 2; ++i) {
      CallOptions pinned = new CallOptions().interpreter(i);
      model.callAsync("spin", null, null, pinned);
    }
    for (int i = 0; i < 200; ++i) model.callAsync(Tensor.of(new float[] {i}));
    System.out.println("RESULT served " + served + ", in flight " + pool.inFlight());
  }

  /**
   * Extracts the bundle in the resource directory `resources` under `cacheRoot` (NativeBundleTest).
   */
  static void extract(String resources, String cacheRoot) throws Exception {
    try (URLClassLoader loader =
        new URLClassLoader(new URL[] {Path.of(resources).toUri().toURL()}, null)) {
      NativeBundle bundle = NativeBundle.find(loader, NativeBundle.currentPlatform());
      System.out.println("RESULT extracted " + bundle.extract(Path.of(cacheRoot)));
    } catch (LibraryLoadException e) {
      System.out.println("RESULT extract-failed " + e.getMessage());
    }
  }

  /**
   * Loads the natives bundled in `resources` through the cache `cacheRoot`, serves a call, and
   * names the files the process mapped.
   */
  static void loadBundled(String resources, String cacheRoot) throws Exception {
    try (URLClassLoader loader =
        new URLClassLoader(new URL[] {Path.of(resources).toUri().toURL()}, null)) {
      NativeLibrary.loadBundled(loader, Path.of(cacheRoot));
    }
    try (Pool pool = Pool.create(1);
        TorchPackage pkg = pool.loadPackage(TestSupport.archive("identity.pt"));
        ReplicatedObject model = pkg.loadPickle("model", "model.pkl");
        Tensor x = Tensor.of(new float[] {1, 2})) {
      Object out = model.call(x);
      for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
        int at = line.indexOf('/');
        if (at >= 0 && line.contains("libmanypy"))
          System.out.println("MAPPED " + line.substring(at));
      }
      System.out.println("RESULT served " + out);
    }
  }
}
