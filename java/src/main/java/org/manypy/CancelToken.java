package org.manypy;

import org.manypy.internal.ManypyNative;

/**
 * Cancels calls from any thread. Give it to calls through {@link
 * CallOptions#cancelToken(CancelToken)}; {@link #cancel()} then stops every
 * call that uses it, running or waiting for an interpreter, with {@link
 * CancelledException}, and every later call that uses it fails at once. A
 * token cannot be reset: use a new one per request (or per group of calls
 * to cancel together).
 *
 * <p>Thread safe. {@link #close()} frees only this handle: CallOptions that
 * were given the token, and calls made with them, keep the native token
 * alive, so closing it early breaks nothing (but {@code cancel()} on a
 * closed token throws IllegalStateException, as every closed handle does).
 */
public final class CancelToken extends NativeResource {
  /** A new, uncancelled token. */
  public CancelToken() {
    super(NativeLibrary.newHandle(ManypyNative::manypy_cancel_token_new),
        ManypyNative::manypy_cancel_token_free, "CancelToken");
  }

  /**
   * Cancels the token. Idempotent. Returns once every running call that uses
   * it has been asked to stop; they throw CancelledException on their own
   * threads soon after.
   */
  public void cancel() {
    with(token -> {
      ManypyNative.manypy_cancel_token_cancel(token);
      return null;
    });
  }

  /** Whether {@link #cancel()} was called. */
  public boolean isCancelled() {
    return with(token -> ManypyNative.manypy_cancel_token_is_cancelled(token) != 0);
  }
}
