package org.manypy;

import java.nio.file.Path;
import java.util.function.Consumer;
import org.manypy.internal.ManypyNative;
import org.manypy.internal.ManypyNativeConstants;

/**
 * Process-wide entry points: loading the native library, versions, operator callbacks, API usage
 * logging, the export hook, the host archive trust and custom operators.
 *
 * <p>The JVM must be started with {@code GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384} in
 * its environment for more than a few interpreters (see the README); without it pool creation fails
 * with {@link StaticTlsException}.
 */
public final class Manypy {
  private static volatile Consumer<Throwable> callbackErrorHandler = Manypy::printCallbackError;

  private Manypy() {}

  /**
   * Loads the native library from `path` (libmanypy_jni.so, or the directory holding it and
   * libmanypy.so) instead of java.library.path. Call before anything else; later calls do nothing
   * once a library is loaded. Throws LibraryLoadException if it does not load or its version does
   * not match.
   */
  public static void load(Path path) {
    NativeLibrary.load(path);
  }

  /** The version this jar was built for, "major.minor.patch". */
  public static String version() {
    return ManypyNativeConstants.MANYPY_VERSION_STRING;
  }

  /** The version of the libmanypy.so loaded. */
  public static String libraryVersion() {
    NativeLibrary.ensureLoaded();
    return ManypyNative.manypy_version_string();
  }

  /** The most interpreters the process can hold at once, all pools together. */
  public static int maxInterpreters() {
    NativeLibrary.ensureLoaded();
    return (int) ManypyNative.manypy_max_interpreters();
  }

  /**
   * CLOCK_MONOTONIC now, in nanoseconds: the clock of {@link CallOptions#deadlineNanos(long)}. Like
   * {@link System#nanoTime()}, only differences between its values mean anything.
   */
  public static long monotonicNanos() {
    NativeLibrary.ensureLoaded();
    return ManypyNative.manypy_monotonic_ns();
  }

  /**
   * Registers callbacks around torch operators in every interpreter (present and future) and in
   * TorchScript on the host, each operator sampled with `samplingProbability` in (0, 1]. `enter` or
   * `exit` may be null. With `needsInputs`, events carry each input's kind, dtype and shape. At
   * most 16 registrations (ResourceExhaustedException beyond).
   */
  public static OpCallbackRegistration addOpCallbacks(
      OpCallback enter, OpCallback exit, double samplingProbability, boolean needsInputs) {
    NativeLibrary.ensureLoaded();
    long[] id = new long[1];
    Status.check(
        ManypyNative.manypy_jni_add_op_callbacks(
            new CallbackDispatch.OpTarget(enter, exit),
            enter != null ? 1 : 0,
            exit != null ? 1 : 0,
            samplingProbability,
            needsInputs ? 1 : 0,
            id));
    return new OpCallbackRegistration(id[0]);
  }

  /**
   * Installs the process's API usage handler, replacing any earlier one (null removes it). Before
   * this returns, the handler receives every key already seen, so each key reaches it once.
   */
  public static void setApiUsageHandler(ApiUsageHandler handler) {
    NativeLibrary.ensureLoaded();
    Status.check(ManypyNative.manypy_jni_set_api_usage_handler(handler));
  }

  /** Logs an API usage key of the caller's; a key already seen is ignored. */
  public static void logApiUsage(String key) {
    NativeLibrary.ensureLoaded();
    Status.check(ManypyNative.manypy_log_api_usage(key));
  }

  /** Installs the process-wide export hook, replacing any earlier one (null removes it). */
  public static void setExportHook(ExportHook hook) {
    NativeLibrary.ensureLoaded();
    Status.check(ManypyNative.manypy_jni_set_export_hook(hook));
  }

  /**
   * Sets the process's host trust, replacing any earlier one (null removes it): what every host
   * load checks ({@link ScriptModule} and {@link AotiModule} loads, from files and from bytes, with
   * or without a trust of their own), so that a service can refuse, with one call at start-up,
   * every model it does not know. Those loads then throw {@link UntrustedArchiveException} for an
   * archive `trust` does not trust, before libtorch reads any of it. A load given a trust must
   * satisfy both: loading code can narrow the policy, never widen it; pools have their own ({@link
   * PoolOptions#trust}). The native library keeps a copy, and with it the verifier, if any, which
   * then runs on whatever thread loads. Any thread may call this; a load already past its check is
   * not affected. A bad digest throws {@link InvalidArgumentException} and leaves the host trust as
   * it was.
   */
  public static void setHostArchiveTrust(ArchiveTrust trust) {
    NativeLibrary.ensureLoaded();
    if (trust == null) {
      Status.check(ManypyNative.manypy_set_host_archive_trust(0));
      return;
    }
    trust.withNative(
        t -> {
          Status.check(ManypyNative.manypy_set_host_archive_trust(t));
          return null;
        });
  }

  /**
   * Loads a custom operator library (TORCH_LIBRARY) into the host and every interpreter, present
   * and future. NotFoundException, LoaderException.
   */
  public static void loadOperatorLibrary(Path library) {
    NativeLibrary.ensureLoaded();
    Status.check(ManypyNative.manypy_load_operator_library(library.toString()));
  }

  /**
   * Where exceptions thrown by callbacks (operator callbacks, the API usage handler, the export
   * hook, archive verifiers) go; they never reach the native caller (a verifier that throws refuses
   * the archive). The default prints them to System.err. The handler must not throw.
   */
  public static void setCallbackErrorHandler(Consumer<Throwable> handler) {
    callbackErrorHandler = handler != null ? handler : Manypy::printCallbackError;
  }

  static void reportCallbackError(Throwable error) {
    try {
      callbackErrorHandler.accept(error);
    } catch (Throwable ignored) {
      // The handler broke its contract; there is nowhere left to report to.
    }
  }

  private static void printCallbackError(Throwable error) {
    System.err.println("manypy: a callback threw " + error);
    error.printStackTrace();
  }
}
