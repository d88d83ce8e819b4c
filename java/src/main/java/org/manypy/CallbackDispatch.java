package org.manypy;

import java.util.concurrent.atomic.AtomicInteger;
import org.manypy.internal.Utf8;

/**
 * The Java end of the native trampolines (java/src/main/native/jni_callbacks.cpp): the glue calls
 * these static methods by name, from any thread. Each catches everything its callback throws, so no
 * Java exception reaches native code.
 */
final class CallbackDispatch {
  private CallbackDispatch() {}

  // Threads running a pool's interpreter-failed callback: the count lets
  // inPoolCallback() skip the ThreadLocal on every other thread's frees.
  private static final AtomicInteger IN_POOL_CALLBACKS = new AtomicInteger();
  private static final ThreadLocal<Boolean> IN_POOL_CALLBACK = new ThreadLocal<>();

  /** Whether this thread runs a pool's callback, where it must not destroy the pool. */
  static boolean inPoolCallback() {
    return IN_POOL_CALLBACKS.get() > 0 && IN_POOL_CALLBACK.get() != null;
  }

  /** The pair of callbacks one registration calls. */
  record OpTarget(OpCallback enter, OpCallback exit) {}

  static void opEvent(
      Object target,
      boolean enter,
      byte[] name,
      long sequenceNumber,
      long threadId,
      int interpreter,
      long startNanos,
      long endNanos,
      byte[] modelId,
      byte[] requestId,
      long[] inputs) {
    try {
      OpTarget t = (OpTarget) target;
      OpEvent event =
          new OpEvent(
              Utf8.decode(name),
              sequenceNumber,
              threadId,
              interpreter,
              startNanos,
              endNanos,
              Utf8.decode(modelId),
              Utf8.decode(requestId),
              OpInput.decode(inputs));
      (enter ? t.enter() : t.exit()).onEvent(event);
    } catch (Throwable error) {
      Manypy.reportCallbackError(error);
    }
  }

  static void apiUsage(Object handler, byte[] key) {
    try {
      ((ApiUsageHandler) handler).onApiUsage(Utf8.decode(key));
    } catch (Throwable error) {
      Manypy.reportCallbackError(error);
    }
  }

  /** Whether the verifier trusts the archive; an exception refuses it. */
  static boolean verifyArchive(Object verifier, byte[] sha256, byte[] origin) {
    try {
      return ((ArchiveVerifier) verifier).trusts(sha256, Utf8.decode(origin));
    } catch (Throwable error) {
      Manypy.reportCallbackError(error);
      return false;
    }
  }

  /**
   * An asynchronous call's outcome (jni_async.cpp), on a manypy thread: `result` or `status` (the
   * other is 0), borrowed, freed by the glue after this returns.
   */
  static void callDone(Object call, long result, long status) {
    try {
      ((AsyncCall) call).completed(result, status);
    } catch (Throwable error) {
      ((AsyncCall) call).lost(error);
    }
  }

  /** A Throwable that escaped {@link #callDone}: the call's future fails with it. */
  static void callLost(Object call, Throwable error) {
    try {
      ((AsyncCall) call).lost(error);
    } catch (Throwable again) {
      Manypy.reportCallbackError(again);
    }
  }

  /**
   * An interpreter of a pool failed to start in the background (jni_serving.cpp), on a manypy
   * thread: `callback` is the pool's InterpreterFailedCallback (the glue holds it by a global
   * reference until manypy releases it), `status` (borrowed) says why. Handles the callback frees
   * are freed on another thread (NativeResource): this thread is the pool's.
   */
  static void interpreterFailed(Object callback, int interpreter, long status) {
    IN_POOL_CALLBACKS.incrementAndGet();
    IN_POOL_CALLBACK.set(Boolean.TRUE);
    try {
      ((InterpreterFailedCallback) callback).onInterpreterFailed(interpreter, Status.read(status));
    } catch (Throwable error) {
      Manypy.reportCallbackError(error);
    } finally {
      IN_POOL_CALLBACK.remove();
      IN_POOL_CALLBACKS.decrementAndGet();
    }
  }

  /** A new native dict of the hook's files (ownership passes to manypy), or 0. */
  static long exportHook(Object hook) {
    try {
      var files = ((ExportHook) hook).extraFiles();
      return files == null || files.isEmpty() ? 0 : Values.optionalDict(files);
    } catch (Throwable error) {
      Manypy.reportCallbackError(error);
      return 0;
    }
  }
}
