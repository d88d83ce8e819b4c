package org.manypy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Options for {@link Pool#create(PoolOptions)}; plain Java, checked when the pool is created.
 * Defaults: 1 interpreter, no extra sys.path entries, 1 intra-op thread per interpreter, {@link
 * ThreadMode#DIRECT}, a stop grace of 100 ms, no queue limit, whole before serving (no serve
 * early), no growth (growth waits 20 ms when a maximum is set), no name, no interpreter-failed
 * callback. Not thread safe.
 */
public final class PoolOptions {
  int interpreters = 1;
  final List<String> sysPath = new ArrayList<>();
  int intraOpThreads = 1;
  ThreadMode threadMode = ThreadMode.DIRECT;
  ArchiveTrust trust = ArchiveTrust.NONE;
  boolean allowProcessExit = false;
  Duration stopGrace = null; // null: the library's default, 100 ms
  long queueLimit = 0; // 0: no limit
  boolean serveEarly = false;
  int maxInterpreters = 0; // 0: the starting number, no growth
  Duration growAfter = null; // null: the library's default, 20 ms
  String name = null; // null: none
  InterpreterFailedCallback onInterpreterFailed = null;

  /** Number of interpreters, 1 to {@link Manypy#maxInterpreters()}. */
  public PoolOptions interpreters(int count) {
    this.interpreters = count;
    return this;
  }

  /** Appends a directory to every interpreter's sys.path for the pool's lifetime. */
  public PoolOptions addSysPath(String directory) {
    sysPath.add(directory);
    return this;
  }

  /** torch intra-op threads per interpreter, >= 1. */
  public PoolOptions intraOpThreads(int threads) {
    this.intraOpThreads = threads;
    return this;
  }

  public PoolOptions threadMode(ThreadMode mode) {
    this.threadMode = mode;
    return this;
  }

  /**
   * Trusts archives with this SHA-256 digest (64 hex digits, as {@code sha256sum} prints it). Once
   * any digest is given, packages of other archives fail with {@link UntrustedArchiveException}
   * before any of their code runs (loading a package runs its pickles, which are code:
   * docs/security.md). Adds to the pool's {@link #trust}; a digest that is not 64 hex digits makes
   * {@link Pool#create(PoolOptions)} throw {@link InvalidArgumentException}.
   */
  public PoolOptions trustSha256(String hexDigest) {
    trust = trust.withSha256(hexDigest);
    return this;
  }

  /**
   * The archives the pool may run: its allow-list and verifier become `trust`'s, replacing what
   * {@link #trustSha256} gave before (later calls of it add to them). The same trust can serve
   * {@link ScriptModule#load(java.nio.file.Path, ArchiveTrust)}. Null throws
   * IllegalArgumentException: {@link ArchiveTrust#NONE} checks nothing.
   */
  public PoolOptions trust(ArchiveTrust trust) {
    this.trust = ArchiveTrust.require(trust);
    return this;
  }

  /**
   * Whether os._exit and os.abort in the pool's interpreters end the JVM (true) or raise
   * manypy.ProcessExitRefused (false, the default).
   */
  public PoolOptions allowProcessExit(boolean allow) {
    this.allowProcessExit = allow;
    return this;
  }

  /**
   * How long a stopped call's clean-up (the model's {@code finally} blocks and {@code __exit__}
   * methods) may run before the stop escalates. A deadline or a cancel raises
   * manypy.DeadlineExceeded (or manypy.Cancelled) once in the model's code; if the call has not
   * returned `grace` later, the model caught the stop or its clean-up hangs: the stop is then
   * raised at every line, which ends the call but cuts its clean-up short, and the interpreter is
   * retired for the rest of the process ({@link Pool#checkInterpreter(int)}, docs/java.md). Default
   * 100 ms. {@link Duration#ZERO} escalates at once, so every stop that does not end the call at
   * its first raise retires the interpreter. A negative grace makes {@link
   * Pool#create(PoolOptions)} throw {@link OutOfRangeException}; one too long for 64-bit
   * nanoseconds (about 292 years) never escalates. Null throws {@link IllegalArgumentException}.
   */
  public PoolOptions stopGrace(Duration grace) {
    if (grace == null) {
      throw new IllegalArgumentException(
          "manypy: stop grace is null (Duration.ZERO escalates at once)");
    }
    this.stopGrace = grace;
    return this;
  }

  /**
   * Admission control: the most calls that may wait for an interpreter of the pool at once (a call
   * waits when the interpreter chosen for it is running another). Synchronous, asynchronous and
   * batched calls count alike, pinned or not. A call past the limit is refused at once, without
   * running, with {@link OverloadedException}, thrown by the call itself ({@code callAsync}
   * included), whatever the load. 0, the default, sets no limit; a negative limit makes {@link
   * Pool#create(PoolOptions)} throw {@link OutOfRangeException}. {@link Pool#queued()} and {@link
   * Pool#inFlight()} report the load.
   */
  public PoolOptions queueLimit(long limit) {
    this.queueLimit = limit;
    return this;
  }

  /**
   * Serve as soon as one interpreter is ready (true), or only once all are (false, the default).
   * With true, {@link Pool#create(PoolOptions)} returns when the first interpreter has started and
   * the others start in the background: calls that may go anywhere go to started interpreters only,
   * and a call pinned to one still starting waits for it, within its deadline. A background start
   * that fails leaves that interpreter broken ({@link PoolStats#broken()}; {@link
   * Pool#checkInterpreter(int)} says why; {@link #onInterpreterFailed} is told) and the pool serves
   * on the others; {@code Pool.create} fails only if no interpreter starts. Off by default so that
   * a pool that is returned is whole: an interpreter that cannot start fails {@code Pool.create}
   * itself. Turn it on for a service behind a readiness probe ({@link Pool#stats()}).
   */
  public PoolOptions serveEarly(boolean serveEarly) {
    this.serveEarly = serveEarly;
    return this;
  }

  /**
   * Growth: the most interpreters the pool may grow to by itself, from the number it starts with
   * ({@link #interpreters(int)}, the least). When a call has waited for an interpreter longer than
   * {@link #growAfter(Duration)}, the pool starts one more in the background, up to this many, and
   * serves on the others meanwhile. 0, the default, means the starting number: no growth. {@link
   * Pool#create(PoolOptions)} throws {@link OutOfRangeException} if it is negative, below the
   * starting number, or above {@link Manypy#maxInterpreters()}. A pool never shrinks by itself
   * ({@link Pool#resize(int)} does).
   */
  public PoolOptions maxInterpreters(int max) {
    this.maxInterpreters = max;
    return this;
  }

  /**
   * How long a call may wait for an interpreter before the pool grows (up to {@link
   * #maxInterpreters(int)}). 20 ms unless set. Below one nanosecond ({@link Duration#ZERO}, a
   * negative wait) {@link Pool#create(PoolOptions)} throws {@link OutOfRangeException}; one too
   * long for 64-bit nanoseconds never grows the pool. Null throws {@link IllegalArgumentException}.
   */
  public PoolOptions growAfter(Duration wait) {
    if (wait == null) {
      throw new IllegalArgumentException("manypy: the wait that grows a pool is null");
    }
    this.growAfter = wait;
    return this;
  }

  /**
   * The pool's name: the {@code pool} label of its metrics ({@link Pool#prometheusText()}, and the
   * tag {@code org.manypy.micrometer.ManypyMetrics} gives its meters), so that the pools of a
   * service can be told apart. Null or "" (the default): none, and no label. A name containing NUL
   * makes {@link Pool#create(PoolOptions)} throw {@link IllegalArgumentException}.
   */
  public PoolOptions name(String name) {
    this.name = name;
    return this;
  }

  /**
   * Told when an interpreter of the pool fails to start in the background (with {@link
   * #serveEarly(boolean)}, or when the pool grows), with its index and the exception saying why, on
   * a manypy thread; see {@link InterpreterFailedCallback}. Null (the default) removes it. The
   * native pool holds the callback (by a JNI global reference) for as long as it lives: until its
   * handle, packages, objects, batchers and asynchronous calls are all closed or done, so a failure
   * reported after {@code close()} while an asynchronous call still holds the pool is told too;
   * then manypy releases it, on whichever thread lets go of the pool last. A pool that is never
   * created releases it at once. Since the reference is a GC root while the pool lives, a callback
   * that refers to the pool (or to a package or object of it) keeps the pool from being collected:
   * close such a pool.
   */
  public PoolOptions onInterpreterFailed(InterpreterFailedCallback callback) {
    this.onInterpreterFailed = callback;
    return this;
  }
}
