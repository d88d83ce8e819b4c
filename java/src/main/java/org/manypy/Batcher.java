package org.manypy;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import org.manypy.internal.ManypyNative;

/**
 * Dynamic batching over one method of a {@link ReplicatedObject}, as TorchServe's and Triton's:
 * concurrent requests are stacked along the batch dimension, the method runs once on the batch, and
 * each request gets its rows of the result. Made by {@link ReplicatedObject#batcher(String,
 * BatcherOptions)}.
 *
 * <ul>
 *   <li>A request is an ordinary call whose tensor arguments carry the batch dimension: a batch-1
 *       request's image is {@code [1, 3, H, W]}. Every tensor of a request has the same number of
 *       rows.
 *   <li>Requests share a batch when their arguments have the same structure, their other arguments
 *       are equal, and their tensors match in dtype and in every dimension but the batch one.
 *       Others wait for batches of their own.
 *   <li>A batch runs when it has {@link BatcherOptions#maxBatch} rows, or {@link
 *       BatcherOptions#maxWait} after its first request came.
 *   <li>Each result tensor (a tensor, or a list, tuple or dict of them) is split back: a request
 *       gets its rows, as views of the batch's result. One whose size along the batch dimension is
 *       not the batch's rows fails every request of the batch with {@link BadTensorException}; any
 *       other error fails every request of its batch with that error.
 *   <li>A request's timeout, deadline and cancel token bound it; one stopped before its batch runs
 *       is dropped from it. The options' interpreter is ignored.
 *   <li>Requests that cannot be split (no tensor, tensors without the batch dimension or with
 *       different rows) are refused at once with {@link InvalidArgumentException}, and requests
 *       past the pool's queue limit with {@link OverloadedException}.
 * </ul>
 *
 * The batch sizes formed go into {@link Profiler#prometheus()}'s output as the histogram {@code
 * manypy_batch_size{batcher="<name>"}}. Thread safe. The batcher holds its object, so the batcher,
 * the object, its package and its pool may be closed in any order; closing the batcher sends the
 * requests still waiting for their batch to fill at once, and each completes as usual.
 */
public final class Batcher extends NativeResource {
  private Batcher(long handle) {
    super(handle, ManypyNative::manypy_batcher_free, "Batcher");
  }

  /** A batcher over the object `object` (held by the caller for this call). */
  static Batcher create(long object, String method, BatcherOptions options) {
    long nativeOptions = BatcherOptions.toNative(options);
    try {
      return new Batcher(
          Values.out(out -> ManypyNative.manypy_batcher_new(object, method, nativeOptions, out)));
    } finally {
      ManypyNative.manypy_batcher_options_free(nativeOptions);
    }
  }

  /** One request with positional arguments, waiting for its rows of the batch's result. */
  public Object call(Object... args) {
    return call(Arrays.asList(args), null, null);
  }

  /**
   * One request, waiting for its result: arguments, options, result and exceptions as for {@link
   * ReplicatedObject#call(String, List, Map, CallOptions)}.
   */
  public Object call(List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return with(
        batcher ->
            CallOptions.with(
                options,
                o ->
                    Values.call(
                        args,
                        kwargs,
                        (a, k, out) -> ManypyNative.manypy_batcher_call(batcher, a, k, o, out))));
  }

  /** One request with positional arguments, asynchronously. */
  public CompletableFuture<Object> callAsync(Object... args) {
    return callAsync(Arrays.asList(args), null, null);
  }

  /** One request, asynchronously, completing on {@code ForkJoinPool.commonPool()}. */
  public CompletableFuture<Object> callAsync(
      List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return callAsync(args, kwargs, options, AsyncCall.DEFAULT_EXECUTOR);
  }

  /**
   * One request, asynchronously, as {@link ReplicatedObject#callAsync(String, List, Map,
   * CallOptions, Executor)}: the future completes through `executor`, {@code cancel} drops the
   * request from its batch (or stops it with the batch, which runs on for the others), and refusals
   * throw here.
   */
  public CompletableFuture<Object> callAsync(
      List<?> args, Map<String, ?> kwargs, CallOptions options, Executor executor) {
    return with(
        batcher ->
            AsyncCall.submit(
                args,
                kwargs,
                options,
                executor,
                (a, k, o, done) ->
                    ManypyNative.manypy_jni_batcher_call_async(batcher, a, k, o, done)));
  }
}
