package org.manypy;

import java.nio.file.Path;
import org.manypy.internal.ManypyNative;

/**
 * A pool of isolated CPython interpreters, each with its own GIL: N Java
 * threads calling into N interpreters run Python in parallel.
 *
 * <p>Interpreters are leased from a process-wide set (at most {@link
 * Manypy#maxInterpreters()} in all) and start on first use (each imports
 * torch, about a second). Closing the pool gives them back, cleaned, for the
 * next pool. Thread safe: any number of threads may use one pool at once;
 * {@link #close()} waits for synchronous calls in flight, and asynchronous
 * ones, which hold the pool, run and complete after it.
 */
public final class Pool extends NativeResource {
  /** Lets the pool choose: a free interpreter if there is one, else the least loaded. */
  public static final int ANY_INTERPRETER = -1;

  private final int size;

  private Pool(long handle) {
    super(handle, ManypyNative::manypy_pool_destroy, "Pool");
    this.size = (int) ManypyNative.manypy_pool_size(handle);
  }

  /** A pool of `interpreters` interpreters with default options. */
  public static Pool create(int interpreters) {
    return create(new PoolOptions().interpreters(interpreters));
  }

  /**
   * Creates a pool and starts its interpreters. Throws OutOfRangeException
   * for a bad interpreter count, ResourceExhaustedException when other open
   * pools hold the process's interpreters (after a garbage collection has
   * had a chance to free unreachable ones), and StaticTlsException when the
   * JVM was not started with the GLIBC_TUNABLES setting more interpreters
   * need.
   */
  public static Pool create(PoolOptions options) {
    long native_ = NativeLibrary.newHandle(ManypyNative::manypy_pool_options_new);
    try {
      Status.check(ManypyNative.manypy_pool_options_set_interpreters(native_, options.interpreters));
      for (String path : options.sysPath) {
        Status.check(ManypyNative.manypy_pool_options_add_sys_path(native_, path));
      }
      Status.check(ManypyNative.manypy_pool_options_set_intra_op_threads(native_, options.intraOpThreads));
      Status.check(ManypyNative.manypy_pool_options_set_thread_mode(native_, options.threadMode.value));
      // The options keep a copy (a verifier is shared by the copies).
      Status.check(options.trust.withNative(
          trust -> ManypyNative.manypy_pool_options_set_archive_trust(native_, trust)));
      Status.check(ManypyNative.manypy_pool_options_set_allow_process_exit(
          native_, options.allowProcessExit ? 1 : 0));
      if (options.stopGrace != null) {
        Status.check(ManypyNative.manypy_pool_options_set_stop_grace(
            native_, CallOptions.saturatedNanos(options.stopGrace)));
      }
      if (options.queueLimit < 0) {
        throw Status.of(ErrorCode.OUT_OF_RANGE,
            "manypy: queue limit " + options.queueLimit + " is negative (0 sets no limit)", "", "");
      }
      Status.check(ManypyNative.manypy_pool_options_set_queue_limit(native_, options.queueLimit));
      return createWithRetries(native_);
    } finally {
      ManypyNative.manypy_pool_options_free(native_);
    }
  }

  /**
   * Interpreters may be leased to pools that are garbage but not yet
   * cleaned. Like the JDK when direct buffer memory runs out, collect, give
   * the cleaners time (about a second in all), and try again before failing.
   */
  private static Pool createWithRetries(long options) {
    long[] out = new long[1];
    for (int attempt = 0; ; ++attempt) {
      long status = ManypyNative.manypy_pool_create(options, out);
      if (status == 0) return new Pool(out[0]);
      ManypyException error = Status.toException(status);
      if (!(error instanceof ResourceExhaustedException) || attempt == 10) throw error;
      System.gc();
      try {
        Thread.sleep(1L << attempt);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw error;
      }
    }
  }

  /** Number of interpreters. */
  public int size() {
    return size;
  }

  /**
   * Calls waiting for an interpreter right now: what {@link PoolOptions#queueLimit(long)}
   * bounds. Calls through the pool's packages, objects and batchers count. For metrics, and
   * for a caller that sheds load itself.
   */
  public long queued() {
    return with(ManypyNative::manypy_pool_queued);
  }

  /**
   * Calls admitted and not yet complete (waiting or running), asynchronous ones included.
   * Read a moment apart from {@link #queued()}, without a lock.
   */
  public long inFlight() {
    return with(ManypyNative::manypy_pool_in_flight);
  }

  /**
   * Returns if interpreter `index` (0 to {@link #size()} - 1) can serve calls.
   * Otherwise throws {@link InterpreterBrokenException}, whose message says
   * why: the interpreter was retired after a stopped call whose clean-up was
   * cut short (a model that caught the stop and went on past the pool's stop
   * grace, {@link PoolOptions#stopGrace(java.time.Duration)}). A retired
   * interpreter never serves again in this process: calls pinned to it throw
   * the same exception, calls to {@link #ANY_INTERPRETER} go to the pool's
   * other interpreters, and it keeps its place among the process's {@link
   * Manypy#maxInterpreters()}. Throws {@link OutOfRangeException} for an
   * index outside the pool. For health checks.
   */
  public void checkInterpreter(int index) {
    check(pool -> ManypyNative.manypy_pool_check_interpreter(pool, index));
  }

  /** Runs Python statements in an interpreter's globals (kept for the pool's lifetime). */
  public void exec(int interpreter, String source) {
    check(pool -> ManypyNative.manypy_pool_exec(pool, interpreter, source));
  }

  /**
   * Runs Python statements in the interpreter of `options` (any, unless
   * {@link CallOptions#interpreter(int)} pins one; null: any), bounded by
   * their timeout, deadline and cancel token as a call is: {@link
   * DeadlineExceededException} or {@link CancelledException} when they stop
   * it (see {@link CallOptions}), {@link OutOfRangeException} for an
   * interpreter outside the pool. Operator callbacks report their context.
   */
  public void exec(String source, CallOptions options) {
    check(pool -> CallOptions.with(options,
        o -> ManypyNative.manypy_pool_exec_with_options(pool, source, o)));
  }

  /** Runs the same statements in every interpreter, in index order; stops at the first failure. */
  public void execAll(String source) {
    check(pool -> ManypyNative.manypy_pool_exec_all(pool, source));
  }

  /** Evaluates a Python expression in an interpreter; the result as Java (see Values). */
  public Object eval(int interpreter, String expression) {
    return with(pool -> Values.result(
        out -> ManypyNative.manypy_pool_eval(pool, interpreter, expression, out)));
  }

  /**
   * Evaluates a Python expression with `options`, as {@link #exec(String,
   * CallOptions)} runs statements; converting the result is part of the
   * bounded work.
   */
  public Object eval(String expression, CallOptions options) {
    return with(pool -> CallOptions.with(options, o -> Values.result(
        out -> ManypyNative.manypy_pool_eval_with_options(pool, expression, o, out))));
  }

  /** Evaluates a Python expression in any interpreter. */
  public Object eval(String expression) {
    return eval(ANY_INTERPRETER, expression);
  }

  /**
   * Loads a torch.package archive, read once into memory that every
   * interpreter of the pool shares (weights are held once); changing the file
   * afterwards changes nothing the package runs. Checked at once: NotFoundException,
   * BadArchiveException, NotAPackageException, UnsupportedVersionException.
   */
  public TorchPackage loadPackage(Path archive) {
    String path = archive.toString();
    return new TorchPackage(with(pool -> Values.out(
        out -> ManypyNative.manypy_package_load_file(pool, path, out))));
  }

  /** Loads a torch.package archive from memory (the bytes are copied). */
  public TorchPackage loadPackage(byte[] archive) {
    return new TorchPackage(with(pool -> Values.out(
        out -> ManypyNative.manypy_package_load_bytes(pool, archive, out))));
  }
}
