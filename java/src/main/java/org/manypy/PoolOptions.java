package org.manypy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Options for {@link Pool#create(PoolOptions)}; plain Java, checked when the
 * pool is created. Defaults: 1 interpreter, no extra sys.path entries, 1
 * intra-op thread per interpreter, {@link ThreadMode#DIRECT}, a stop grace of
 * 100 ms, no queue limit. Not thread safe.
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
   * Trusts archives with this SHA-256 digest (64 hex digits, as {@code sha256sum} prints it).
   * Once any digest is given, packages of other archives fail with
   * {@link UntrustedArchiveException} before any of their code runs (loading a package runs
   * its pickles, which are code: docs/security.md). Adds to the pool's {@link #trust}; a
   * digest that is not 64 hex digits makes {@link Pool#create(PoolOptions)} throw
   * {@link InvalidArgumentException}.
   */
  public PoolOptions trustSha256(String hexDigest) {
    trust = trust.withSha256(hexDigest);
    return this;
  }

  /**
   * The archives the pool may run: its allow-list and verifier become `trust`'s, replacing
   * what {@link #trustSha256} gave before (later calls of it add to them). The same trust can
   * serve {@link ScriptModule#load(java.nio.file.Path, ArchiveTrust)}. Null throws
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
   * How long a stopped call's clean-up (the model's {@code finally} blocks and
   * {@code __exit__} methods) may run before the stop escalates. A deadline or
   * a cancel raises manypy.DeadlineExceeded (or manypy.Cancelled) once in the
   * model's code; if the call has not returned `grace` later, the model caught
   * the stop or its clean-up hangs: the stop is then raised at every line,
   * which ends the call but cuts its clean-up short, and the interpreter is
   * retired for the rest of the process ({@link Pool#checkInterpreter(int)},
   * docs/java.md). Default 100 ms. {@link Duration#ZERO} escalates at once,
   * so every stop that does not end the call at its first raise retires the
   * interpreter. A negative grace makes {@link Pool#create(PoolOptions)} throw
   * {@link OutOfRangeException}; one too long for 64-bit nanoseconds (about
   * 292 years) never escalates. Null throws {@link IllegalArgumentException}.
   */
  public PoolOptions stopGrace(Duration grace) {
    if (grace == null) {
      throw new IllegalArgumentException("manypy: stop grace is null (Duration.ZERO escalates at once)");
    }
    this.stopGrace = grace;
    return this;
  }

  /**
   * Admission control: the most calls that may wait for an interpreter of the pool at once
   * (a call waits when the interpreter chosen for it is running another). Synchronous,
   * asynchronous and batched calls count alike, pinned or not. A call past the limit is
   * refused at once, without running, with {@link OverloadedException}, thrown by the call
   * itself ({@code callAsync} included), whatever the load. 0, the default, sets no limit; a
   * negative limit makes {@link Pool#create(PoolOptions)} throw {@link OutOfRangeException}.
   * {@link Pool#queued()} and {@link Pool#inFlight()} report the load.
   */
  public PoolOptions queueLimit(long limit) {
    this.queueLimit = limit;
    return this;
  }
}
