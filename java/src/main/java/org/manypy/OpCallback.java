package org.manypy;

/**
 * Called around sampled torch operators ({@link Manypy#addOpCallbacks}), on the thread running the
 * operator, concurrently from many threads, while that thread holds an interpreter. Must be quick
 * and must not call manypy. An exception it throws is caught and reported to the callback error
 * handler ({@link Manypy#setCallbackErrorHandler}); it never reaches the model.
 */
@FunctionalInterface
public interface OpCallback {
  void onEvent(OpEvent event);
}
