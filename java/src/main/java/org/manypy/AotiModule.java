package org.manypy;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import org.manypy.internal.ManypyNative;

/**
 * A torch.export / AOTInductor package (a {@code .pt2} file that {@code
 * torch._inductor.aoti_compile_and_package} wrote) run by libtorch's own loader in the host
 * process: a model compiled to native code, no Python, no interpreter. PyTorch's successor to
 * TorchScript for models that need no Python.
 *
 * <p>It has no methods: {@link #call(Object...)} runs the exported forward with arguments of the
 * structure its example inputs had (tensors at the leaves; lists, {@link Tuple}s and string-keyed
 * Maps around them), and returns the structure it returned (a Tensor, or Lists, Tuples and Maps of
 * them), converted as {@link ScriptModule} results are. Contiguous tensors are passed without a
 * copy; results are new tensors. It needs a manypy built against torch 2.6 or newer: elsewhere
 * every load throws {@link UnsupportedVersionException} whose message names the torch needed.
 *
 * <p>Thread safe: any number of threads may call one module at once. Up to one call per core runs
 * at a time; more wait for a free copy of the model's buffers.
 *
 * <p>Trust: a package holds a compiled library, and loading it runs that library's code, with the
 * JVM's rights. Every load checks the host trust ({@link Manypy#setHostArchiveTrust}), if one is
 * set, and {@link #load(Path, ArchiveTrust)} the given trust too (both must accept), before
 * libtorch reads any of the package.
 *
 * <p>Deadlines and cancellation ({@link CallOptions}): a timeout, a deadline or a cancelled token
 * is checked before the compiled model starts and when it returns; compiled kernels cannot be
 * stopped while they run, so a call that passes its deadline while running still finishes, and its
 * late result is dropped ({@link DeadlineExceededException}, {@link CancelledException}).
 *
 * <p>Closing: calls hold the module for their duration, so a {@link #close()} that races calls on
 * other threads frees it after they return, and calls that start after it throw
 * IllegalStateException; asynchronous calls already submitted hold the native module until they
 * complete, and still run. Operator callbacks see one operator per call, {@code
 * "manypy::aoti_run"}, with the call's context and, if asked, its input tensors: the compiled
 * kernels call no operator through libtorch's dispatcher.
 */
public final class AotiModule extends NativeResource {
  private AotiModule(long handle) {
    super(handle, ManypyNative::manypy_aoti_free, "AotiModule");
  }

  /**
   * Loads a .pt2 package from a file (read once). Checks only the host trust ({@link
   * Manypy#setHostArchiveTrust}), if one is set: load only packages you trust, or give a trust
   * ({@link #load(Path, ArchiveTrust)}). Throws {@link UnsupportedVersionException} when this
   * manypy has no AOTInductor (torch older than 2.6) or the package was compiled for what this host
   * is not (CUDA, another CPU architecture or instruction set, another OS); {@link LoaderException}
   * when its compiled library does not load (compiled against another torch, a library it needs
   * missing); {@link NotAPackageException} for a PyTorch archive that is no AOTInductor package
   * (TorchScript, a torch.package, an exported program without a compiled model); {@link
   * BadArchiveException} for a truncated or inconsistent one; {@link UntrustedArchiveException};
   * {@link NotFoundException}.
   */
  public static AotiModule load(Path pt2) {
    NativeLibrary.ensureLoaded();
    String path = pt2.toString();
    return loaded(out -> ManypyNative.manypy_aoti_load_file(path, 0, out));
  }

  /**
   * Loads a .pt2 package from memory (copied). Checks only the host trust, as {@link #load(Path)}.
   */
  public static AotiModule load(byte[] pt2) {
    NativeLibrary.ensureLoaded();
    return loaded(out -> ManypyNative.manypy_aoti_load_bytes(pt2, 0, out));
  }

  /**
   * Loads a .pt2 package that `trust` trusts (its SHA-256 is listed or its verifier accepts it,
   * origin: the path), and the host trust too, if one is set: both must accept. Any other throws
   * {@link UntrustedArchiveException}, whose message gives the digest and which trust refused,
   * before libtorch reads any of it. Null throws IllegalArgumentException ({@link
   * ArchiveTrust#NONE} adds nothing to the host trust). Other errors as {@link #load(Path)}.
   */
  public static AotiModule load(Path pt2, ArchiveTrust trust) {
    String path = pt2.toString();
    return ArchiveTrust.require(trust)
        .withNative(t -> loaded(out -> ManypyNative.manypy_aoti_load_file(path, t, out)));
  }

  /** The same from memory (the verifier's origin is {@code "<bytes>"}). */
  public static AotiModule load(byte[] pt2, ArchiveTrust trust) {
    return ArchiveTrust.require(trust)
        .withNative(t -> loaded(out -> ManypyNative.manypy_aoti_load_bytes(pt2, t, out)));
  }

  private static AotiModule loaded(Values.OutCall load) {
    return new AotiModule(Values.out(load));
  }

  /**
   * Calls the model with positional arguments. Arguments that do not fit are refused: the wrong
   * number of them, or a missing or extra key, with {@link InvalidArgumentException} (the message
   * names the structure expected); a non-tensor where a tensor belongs with {@link
   * WrongKindException}; a dtype, shape or device the model was not compiled for with {@link
   * BadTensorException}. A failure inside the compiled model is {@link PythonException}.
   */
  public Object call(Object... args) {
    return call(Arrays.asList(args), null, null);
  }

  /**
   * Calls the model with `args` and `kwargs` (either may be null) and `options` (may be null):
   * their timeout, deadline and cancel token are checked before the compiled model starts and when
   * it returns (a late result is dropped: {@link DeadlineExceededException}, {@link
   * CancelledException}); operator callbacks report their context. Their interpreter index is
   * ignored: there is no interpreter. Errors as {@link #call(Object...)}.
   */
  public Object call(List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return with(
        module ->
            CallOptions.with(
                options,
                o ->
                    Values.call(
                        args,
                        kwargs,
                        (a, k, out) -> ManypyNative.manypy_aoti_call(module, a, k, o, out))));
  }

  /** {@link #call(Object...)}, asynchronously. */
  public CompletableFuture<Object> callAsync(Object... args) {
    return callAsync(Arrays.asList(args), null, null, AsyncCall.DEFAULT_EXECUTOR);
  }

  /** The general call, asynchronously, completing on {@code ForkJoinPool.commonPool()}. */
  public CompletableFuture<Object> callAsync(
      List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return callAsync(args, kwargs, options, AsyncCall.DEFAULT_EXECUTOR);
  }

  /**
   * Submits {@link #call(List, Map, CallOptions)} and returns at once: the call runs on one of the
   * process's host worker threads (as many as cores), in submission order, and the future completes
   * through `executor`, as {@link ReplicatedObject#callAsync(String, List, Map, CallOptions,
   * Executor)} describes (cancel, the options' token and timeout). Arguments that do not fit the
   * model, and a closed module, are refused here: thrown, never through the future. A package has
   * no pool, so no queue limit applies. Closing the module after submitting is safe: the call holds
   * it.
   */
  public CompletableFuture<Object> callAsync(
      List<?> args, Map<String, ?> kwargs, CallOptions options, Executor executor) {
    return with(
        module ->
            AsyncCall.submit(
                args,
                kwargs,
                options,
                executor,
                (a, k, o, done) -> ManypyNative.manypy_jni_aoti_call_async(module, a, k, o, done)));
  }

  /**
   * What AOTInductor recorded when it compiled the model (AOTI_DEVICE_KEY, AOTI_CPU_ISA,
   * AOTI_MACHINE, ...), in its order; unmodifiable. Extra files are records of the archive: {@link
   * Archives#readFile} reads them, {@link Archives#saveCopy} writes a copy with more.
   */
  public Map<String, String> metadata() {
    Object dict =
        with(module -> Values.result(out -> ManypyNative.manypy_aoti_metadata(module, out)));
    Map<String, String> strings = new LinkedHashMap<>();
    for (Map.Entry<?, ?> entry : ((Map<?, ?>) dict).entrySet()) {
      strings.put((String) entry.getKey(), (String) entry.getValue());
    }
    return Collections.unmodifiableMap(strings);
  }
}
