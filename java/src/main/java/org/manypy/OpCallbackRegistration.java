package org.manypy;

import java.util.concurrent.atomic.AtomicBoolean;
import org.manypy.internal.ManypyNative;

/**
 * A live registration of operator callbacks. {@link #close()} removes it: when close returns, no
 * callback of it runs or will run. A registration that is dropped without close stays registered
 * (like a listener): the callbacks are held by the native side until it is closed.
 */
public final class OpCallbackRegistration implements AutoCloseable {
  private final long id;
  private final AtomicBoolean closed = new AtomicBoolean();

  OpCallbackRegistration(long id) {
    this.id = id;
  }

  /** The native registration id. */
  public long id() {
    return id;
  }

  /** Removes the callbacks. Idempotent. */
  @Override
  public void close() {
    if (closed.compareAndSet(false, true)) {
      Status.check(ManypyNative.manypy_jni_remove_op_callbacks(id));
    }
  }
}
