package org.manypy;

/**
 * Told when an interpreter of a pool fails to start in the background: one of a serve-early pool's
 * ({@link PoolOptions#serveEarly(boolean)}) or one the pool grew by ({@link
 * PoolOptions#maxInterpreters(int)}). The pool serves on its other interpreters; the failed one
 * stays in the pool, broken ({@link PoolStats#broken()}, and {@link Pool#checkInterpreter(int)}
 * says why). See {@link PoolOptions#onInterpreterFailed(InterpreterFailedCallback)}.
 */
@FunctionalInterface
public interface InterpreterFailedCallback {
  /**
   * Runs on a thread of manypy's (attached to the JVM as a daemon named {@code manypy-native}). An
   * exception it throws goes to {@link Manypy#setCallbackErrorHandler}. It may call manypy, close
   * the pool included.
   *
   * @param interpreter the failed interpreter's index in the pool
   * @param why what failed, e.g. a {@link StaticTlsException}
   */
  void onInterpreterFailed(int interpreter, ManypyException why);
}
