package org.manypy;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.manypy.internal.ManypyNative;
import org.manypy.internal.ManypyNativeConstants;
import org.manypy.internal.Utf8;

/**
 * A pool of isolated CPython interpreters, each with its own GIL: N Java threads calling into N
 * interpreters run Python in parallel.
 *
 * <p>Interpreters are leased from a process-wide set (at most {@link Manypy#maxInterpreters()} in
 * all) and start on first use (each imports torch, about a second). Closing the pool gives them
 * back, cleaned, for the next pool. Thread safe: any number of threads may use one pool at once;
 * {@link #close()} waits for synchronous calls in flight, and asynchronous ones, which hold the
 * pool, run and complete after it.
 *
 * <p>Serving lifecycle: a pool may serve before all its interpreters have started ({@link
 * PoolOptions#serveEarly(boolean)}), grow by itself on long waits ({@link
 * PoolOptions#maxInterpreters(int)}) or by {@link #resize(int)}, report its health ({@link
 * #stats()}) and request metrics ({@link #requestMetrics()}, {@link #prometheusText()}), and drain
 * ({@link #drain(Duration)}) before a service stops.
 */
public final class Pool extends NativeResource {
  /** Lets the pool choose: a free interpreter if there is one, else the least loaded. */
  public static final int ANY_INTERPRETER = -1;

  private final String name;

  private Pool(long handle, String name) {
    super(handle, ManypyNative::manypy_pool_destroy, "Pool");
    this.name = name;
  }

  /** A pool of `interpreters` interpreters with default options. */
  public static Pool create(int interpreters) {
    return create(new PoolOptions().interpreters(interpreters));
  }

  /**
   * Creates a pool and starts its interpreters. Throws OutOfRangeException for a bad interpreter
   * count, ResourceExhaustedException when other open pools hold the process's interpreters (after
   * a garbage collection has had a chance to free unreachable ones), and StaticTlsException when
   * the JVM was not started with the GLIBC_TUNABLES setting more interpreters need.
   */
  public static Pool create(PoolOptions options) {
    long native_ = NativeLibrary.newHandle(ManypyNative::manypy_pool_options_new);
    try {
      Status.check(
          ManypyNative.manypy_pool_options_set_interpreters(native_, options.interpreters));
      for (String path : options.sysPath) {
        Status.check(ManypyNative.manypy_pool_options_add_sys_path(native_, path));
      }
      Status.check(
          ManypyNative.manypy_pool_options_set_intra_op_threads(native_, options.intraOpThreads));
      Status.check(
          ManypyNative.manypy_pool_options_set_thread_mode(native_, options.threadMode.value));
      // The options keep a copy (a verifier is shared by the copies).
      Status.check(
          options.trust.withNative(
              trust -> ManypyNative.manypy_pool_options_set_archive_trust(native_, trust)));
      Status.check(
          ManypyNative.manypy_pool_options_set_allow_process_exit(
              native_, options.allowProcessExit ? 1 : 0));
      if (options.stopGrace != null) {
        Status.check(
            ManypyNative.manypy_pool_options_set_stop_grace(
                native_, CallOptions.saturatedNanos(options.stopGrace)));
      }
      if (options.queueLimit < 0) {
        throw Status.of(
            ErrorCode.OUT_OF_RANGE,
            "manypy: queue limit " + options.queueLimit + " is negative (0 sets no limit)",
            "",
            "");
      }
      Status.check(ManypyNative.manypy_pool_options_set_queue_limit(native_, options.queueLimit));
      Status.check(
          ManypyNative.manypy_pool_options_set_serve_early(native_, options.serveEarly ? 1 : 0));
      if (options.maxInterpreters < 0) {
        throw Status.of(
            ErrorCode.OUT_OF_RANGE,
            "manypy: the most interpreters "
                + options.maxInterpreters
                + " is negative (0: the starting number, no growth)",
            "",
            "");
      }
      Status.check(
          ManypyNative.manypy_pool_options_set_max_interpreters(native_, options.maxInterpreters));
      if (options.growAfter != null) {
        Status.check(
            ManypyNative.manypy_pool_options_set_grow_after(
                native_, CallOptions.saturatedNanos(options.growAfter)));
      }
      String name = options.name == null ? "" : options.name;
      if (!name.isEmpty()) Status.check(ManypyNative.manypy_pool_options_set_name(native_, name));
      // Set before the pool exists: with serveEarly, a background start may
      // fail while create runs. The glue holds the callback by a global
      // reference that manypy releases when the options (freed below) and
      // every pool made from them are gone, or at once if this fails.
      if (options.onInterpreterFailed != null) {
        Status.check(
            ManypyNative.manypy_jni_pool_options_set_on_interpreter_failed(
                native_, options.onInterpreterFailed));
      }
      return createWithRetries(native_, name);
    } finally {
      ManypyNative.manypy_pool_options_free(native_);
    }
  }

  /**
   * Interpreters may be leased to pools that are garbage but not yet cleaned. Like the JDK when
   * direct buffer memory runs out, collect, give the cleaners time (about a second in all), and try
   * again before failing.
   */
  private static Pool createWithRetries(long options, String name) {
    long[] out = new long[1];
    for (int attempt = 0; ; ++attempt) {
      long status = ManypyNative.manypy_pool_create(options, out);
      if (status == 0) return new Pool(out[0], name);
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

  /**
   * Number of interpreters in the pool now (starting, ready, busy or broken): indices 0 to size() -
   * 1 are valid for pinned calls. Read from the pool at each call, since it changes with {@link
   * #resize(int)} and growth ({@link PoolOptions#maxInterpreters(int)}): read it when needed rather
   * than keeping it. A closed pool throws {@link IllegalStateException}.
   */
  public int size() {
    return (int) (long) with(ManypyNative::manypy_pool_size);
  }

  /** The pool's name ({@link PoolOptions#name(String)}), "" for none. */
  public String name() {
    return name;
  }

  /**
   * The pool's health now: interpreters by state, calls in flight and queued, whether it drains,
   * and calls completed by code. Lock-free reads, so the counts may be taken a moment apart. For
   * readiness probes: a serve-early pool is ready once {@link PoolStats#serving()}.
   */
  public PoolStats stats() {
    long[] values = new long[ManypyNativeConstants.MANYPY_JNI_POOL_STATS_LENGTH];
    check(pool -> ManypyNative.manypy_jni_pool_get_stats(pool, values));
    return PoolStats.decode(values);
  }

  /**
   * Resizes the pool to `interpreters`, 1 to {@link Manypy#maxInterpreters()}. Growing leases
   * interpreters from the process's set (starting new ones) and returns once they serve; one that
   * fails to start stays in the pool, broken, and its failure is thrown. Shrinking takes the
   * highest indices out at once (calls pinned to them then throw {@link OutOfRangeException}; calls
   * running there finish first) and gives them back to the process for other pools; their memory
   * stays with the process. Throws {@link OutOfRangeException} for a count outside 1 to {@link
   * Manypy#maxInterpreters()}, {@link ResourceExhaustedException} when the process has too few
   * interpreters left, {@link DrainingException} while the pool drains. Resizes of one pool run one
   * at a time.
   */
  public void resize(int interpreters) {
    if (interpreters < 0) {
      throw Status.of(
          ErrorCode.OUT_OF_RANGE,
          "manypy_pool_resize: a pool needs 1 to "
              + Manypy.maxInterpreters()
              + " interpreters on this platform, not "
              + interpreters,
          "",
          "");
    }
    check(pool -> ManypyNative.manypy_pool_resize(pool, interpreters));
  }

  /**
   * Drains the pool with no deadline: waits until every call it has, running or queued, finished.
   * See {@link #drainUntil(long)}.
   */
  public DrainResult drain() {
    return drainUntil(0);
  }

  /**
   * Drains the pool, cancelling at `timeout` from now what is left; {@link Duration#ZERO} cancels
   * at once. See {@link #drainUntil(long)}. A negative timeout throws {@link OutOfRangeException},
   * a null one {@link IllegalArgumentException}; one too long for 64-bit nanoseconds is no
   * deadline.
   */
  public DrainResult drain(Duration timeout) {
    if (timeout == null) throw new IllegalArgumentException("manypy: the drain's timeout is null");
    if (timeout.isNegative()) {
      throw Status.of(
          ErrorCode.OUT_OF_RANGE,
          "manypy: the drain's timeout " + timeout + " is negative",
          "",
          "");
    }
    long now = Manypy.monotonicNanos();
    long nanos = CallOptions.saturatedNanos(timeout);
    // No deadline past 64-bit nanoseconds (0 is the C API's "none").
    return drainUntil(nanos > Long.MAX_VALUE - now ? 0 : Math.max(1, now + nanos));
  }

  /**
   * Graceful drain, for a service that is stopping (SIGTERM) or moving traffic away: from now on
   * the pool refuses new calls with {@link DrainingException}, through its packages, objects and
   * batchers too, synchronous and asynchronous. Calls already running or queued go on; at
   * `deadlineNanos` (absolute, on the clock of {@link Manypy#monotonicNanos()}; 0: no deadline)
   * those left are cancelled, as by a cancel token: they end with {@link CancelledException}.
   * Returns when no call is left, or when those cancelled have had twice their stop grace ({@link
   * PoolOptions#stopGrace(Duration)}) to end. A pool never stops draining; {@link #close()} it when
   * done.
   *
   * <p>May be called again, or from several threads: each call waits the same way and counts the
   * calls in flight when it began. The drain holds the pool: a {@link #close()} from another thread
   * meanwhile returns at once, and the pool is freed when the drain returns. A negative deadline
   * throws {@link OutOfRangeException}. The waiting thread is not interruptible: bound it with a
   * deadline.
   */
  public DrainResult drainUntil(long deadlineNanos) {
    long[] finished = new long[1];
    long[] cancelled = new long[1];
    check(pool -> ManypyNative.manypy_pool_drain(pool, deadlineNanos, finished, cancelled));
    return new DrainResult(finished[0], cancelled[0]);
  }

  /**
   * The pool's metrics in the Prometheus text exposition format, for a service's /metrics endpoint:
   * {@code manypy_requests_total{model,code}}, the histograms {@code
   * manypy_request_duration_seconds{model}} and {@code manypy_queue_duration_seconds{model}} (with
   * their buckets), the gauges {@code manypy_inflight_requests}, {@code manypy_queued_requests},
   * {@code manypy_interpreters{state}} and {@code manypy_draining}; every series with {@code
   * pool="<name>"} when the pool has a name.
   */
  public String prometheusText() {
    return (String)
        with(pool -> Values.result(out -> ManypyNative.manypy_pool_prometheus(pool, out)));
  }

  /** Every model's request metrics, in the order the models were first called. */
  public List<RequestMetrics> requestMetrics() {
    long pool = acquire();
    try {
      long[] metrics = new long[1];
      long[] count = new long[1];
      Status.check(ManypyNative.manypy_pool_request_metrics(pool, metrics, count));
      try {
        List<RequestMetrics> out = new ArrayList<>((int) count[0]);
        for (long i = 0; i < count[0]; ++i) {
          out.add(
              RequestMetrics.decode(
                  Utf8.decode(ManypyNative.manypy_jni_request_metrics_model(metrics[0], i)),
                  ManypyNative.manypy_jni_request_metrics_counts(metrics[0], i),
                  ManypyNative.manypy_jni_request_metrics_seconds(metrics[0], i)));
        }
        return List.copyOf(out);
      } finally {
        ManypyNative.manypy_request_metrics_free(metrics[0], count[0]);
      }
    } finally {
      release();
    }
  }

  /**
   * Calls waiting for an interpreter right now: what {@link PoolOptions#queueLimit(long)} bounds.
   * Calls through the pool's packages, objects and batchers count. For metrics, and for a caller
   * that sheds load itself.
   */
  public long queued() {
    return with(ManypyNative::manypy_pool_queued);
  }

  /**
   * Calls admitted and not yet complete (waiting or running), asynchronous ones included. Read a
   * moment apart from {@link #queued()}, without a lock.
   */
  public long inFlight() {
    return with(ManypyNative::manypy_pool_in_flight);
  }

  /**
   * Returns if interpreter `index` (0 to {@link #size()} - 1) can serve calls. Otherwise throws
   * {@link InterpreterBrokenException}, whose message says why: the interpreter was retired after a
   * stopped call whose clean-up was cut short (a model that caught the stop and went on past the
   * pool's stop grace, {@link PoolOptions#stopGrace(java.time.Duration)}). A retired interpreter
   * never serves again in this process: calls pinned to it throw the same exception, calls to
   * {@link #ANY_INTERPRETER} go to the pool's other interpreters, and it keeps its place among the
   * process's {@link Manypy#maxInterpreters()}. Throws {@link OutOfRangeException} for an index
   * outside the pool. For health checks.
   */
  public void checkInterpreter(int index) {
    check(pool -> ManypyNative.manypy_pool_check_interpreter(pool, index));
  }

  /** Runs Python statements in an interpreter's globals (kept for the pool's lifetime). */
  public void exec(int interpreter, String source) {
    check(pool -> ManypyNative.manypy_pool_exec(pool, interpreter, source));
  }

  /**
   * Runs Python statements in the interpreter of `options` (any, unless {@link
   * CallOptions#interpreter(int)} pins one; null: any), bounded by their timeout, deadline and
   * cancel token as a call is: {@link DeadlineExceededException} or {@link CancelledException} when
   * they stop it (see {@link CallOptions}), {@link OutOfRangeException} for an interpreter outside
   * the pool. Operator callbacks report their context.
   */
  public void exec(String source, CallOptions options) {
    check(
        pool ->
            CallOptions.with(
                options, o -> ManypyNative.manypy_pool_exec_with_options(pool, source, o)));
  }

  /** Runs the same statements in every interpreter, in index order; stops at the first failure. */
  public void execAll(String source) {
    check(pool -> ManypyNative.manypy_pool_exec_all(pool, source));
  }

  /** Evaluates a Python expression in an interpreter; the result as Java (see Values). */
  public Object eval(int interpreter, String expression) {
    return with(
        pool ->
            Values.result(
                out -> ManypyNative.manypy_pool_eval(pool, interpreter, expression, out)));
  }

  /**
   * Evaluates a Python expression with `options`, as {@link #exec(String, CallOptions)} runs
   * statements; converting the result is part of the bounded work.
   */
  public Object eval(String expression, CallOptions options) {
    return with(
        pool ->
            CallOptions.with(
                options,
                o ->
                    Values.result(
                        out ->
                            ManypyNative.manypy_pool_eval_with_options(pool, expression, o, out))));
  }

  /** Evaluates a Python expression in any interpreter. */
  public Object eval(String expression) {
    return eval(ANY_INTERPRETER, expression);
  }

  /**
   * Loads a torch.package archive, read once into memory that every interpreter of the pool shares
   * (weights are held once); changing the file afterwards changes nothing the package runs. Checked
   * at once: NotFoundException, BadArchiveException, NotAPackageException,
   * UnsupportedVersionException.
   */
  public TorchPackage loadPackage(Path archive) {
    String path = archive.toString();
    return with(
        pool ->
            new TorchPackage(
                Values.out(out -> ManypyNative.manypy_package_load_file(pool, path, out))));
  }

  /** Loads a torch.package archive from memory (the bytes are copied). */
  public TorchPackage loadPackage(byte[] archive) {
    return with(
        pool ->
            new TorchPackage(
                Values.out(out -> ManypyNative.manypy_package_load_bytes(pool, archive, out))));
  }
}
