package org.manypy;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.manypy.internal.ManypyNative;

/**
 * Cancels calls from any thread. Give it to calls through {@link
 * CallOptions#cancelToken(CancelToken)}; {@link #cancel()} then stops every call that uses it,
 * running or waiting for an interpreter, with {@link CancelledException}, and every later call that
 * uses it fails at once. A token cannot be reset: use a new one per request (or per group of calls
 * to cancel together).
 *
 * <p>Thread safe. {@link #close()} frees only this handle: CallOptions that were given the token,
 * and calls made with them, keep the native token alive, so closing it early breaks nothing (but
 * {@code cancel()} on a closed token throws IllegalStateException, as every closed handle does).
 */
public final class CancelToken extends NativeResource {
  // Asynchronous calls run with a native token of their own (for
  // Future.cancel), so this token reaches them through these links.
  private final Set<AsyncCall> linked = ConcurrentHashMap.newKeySet();
  // Set by cancel() before it cancels anything: the native token can only
  // be cancelled through it, and a closed token can still be read here.
  private volatile boolean cancelled;

  /** A new, uncancelled token. */
  public CancelToken() {
    super(
        NativeLibrary.newHandle(ManypyNative::manypy_cancel_token_new),
        ManypyNative::manypy_cancel_token_free,
        "CancelToken");
  }

  /**
   * Cancels the token. Idempotent. Returns once every running call that uses it has been asked to
   * stop; they throw CancelledException on their own threads soon after.
   */
  public void cancel() {
    with(
        token -> {
          cancelled = true;
          ManypyNative.manypy_cancel_token_cancel(token);
          return null;
        });
    for (AsyncCall call : linked) call.cancelNative();
  }

  /**
   * Makes this token cancel `call` too, at once if it is already cancelled. Either this sees the
   * call in `linked` or the call's link sees `cancelled`: both are written before the other is
   * read.
   */
  void link(AsyncCall call) {
    linked.add(call);
    if (cancelled) call.cancelNative();
  }

  void unlink(AsyncCall call) {
    linked.remove(call);
  }

  /** Whether {@link #cancel()} was called. */
  public boolean isCancelled() {
    return with(token -> ManypyNative.manypy_cancel_token_is_cancelled(token) != 0);
  }
}
