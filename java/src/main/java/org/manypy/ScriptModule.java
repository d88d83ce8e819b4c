package org.manypy;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import org.manypy.internal.ManypyNative;

/**
 * A TorchScript module run by libtorch in the host process: no Python, no interpreter. Thread safe:
 * any number of threads may call it at once. For torch.export / AOTInductor packages (.pt2), see
 * {@link AotiModule}.
 */
public final class ScriptModule extends NativeResource {
  private ScriptModule(long handle) {
    super(handle, ManypyNative::manypy_script_free, "ScriptModule");
  }

  /**
   * Loads a TorchScript archive (torch.jit.save). Checks only the host trust ({@link
   * Manypy#setHostArchiveTrust}), if one is set: load only archives you trust, or give a trust
   * ({@link #load(Path, ArchiveTrust)}).
   */
  public static ScriptModule load(Path archive) {
    NativeLibrary.ensureLoaded();
    String path = archive.toString();
    return loaded(out -> ManypyNative.manypy_script_load_file(path, out));
  }

  /**
   * Loads a TorchScript archive from memory. Checks only the host trust, as {@link #load(Path)}.
   */
  public static ScriptModule load(byte[] archive) {
    NativeLibrary.ensureLoaded();
    return loaded(out -> ManypyNative.manypy_script_load_bytes(archive, out));
  }

  /**
   * Loads a TorchScript archive that `trust` trusts, and the host trust too, if one is set: its
   * SHA-256 is listed or its verifier accepts it (origin: the path). Any other throws {@link
   * UntrustedArchiveException}, whose message gives the digest, before libtorch reads any of it:
   * libtorch compiles an archive's code as it loads, and its compiler trusts that code
   * (docs/security.md). Null throws IllegalArgumentException ({@link ArchiveTrust#NONE} adds
   * nothing to the host trust).
   */
  public static ScriptModule load(Path archive, ArchiveTrust trust) {
    String path = archive.toString();
    return ArchiveTrust.require(trust)
        .withNative(t -> loaded(out -> ManypyNative.manypy_script_load_file_trusted(path, t, out)));
  }

  /** The same from memory (the verifier's origin is {@code "<bytes>"}). */
  public static ScriptModule load(byte[] archive, ArchiveTrust trust) {
    return ArchiveTrust.require(trust)
        .withNative(
            t -> loaded(out -> ManypyNative.manypy_script_load_bytes_trusted(archive, t, out)));
  }

  private static ScriptModule loaded(Values.OutCall load) {
    return new ScriptModule(Values.out(load));
  }

  /** Calls forward. */
  public Object call(Object... args) {
    return call(null, Arrays.asList(args), null);
  }

  /** Calls `method` (null: forward) in inference mode. */
  public Object call(String method, List<?> args, Map<String, ?> kwargs) {
    return call(method, args, kwargs, null);
  }

  /**
   * Calls `method` (null: forward) in inference mode with `options` (may be null): their timeout or
   * deadline and cancel token stop the method before its next tensor operator ({@link
   * DeadlineExceededException}, {@link CancelledException}), and operator callbacks report their
   * context. Their interpreter index is ignored: there is no interpreter.
   */
  public Object call(String method, List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return with(
        module ->
            CallOptions.with(
                options,
                o ->
                    Values.call(
                        args,
                        kwargs,
                        (a, k, out) ->
                            ManypyNative.manypy_script_call(module, method, a, k, o, out))));
  }

  /** {@link #call(Object...)}, asynchronously. */
  public CompletableFuture<Object> callAsync(Object... args) {
    return callAsync(null, Arrays.asList(args), null, null);
  }

  /** {@link #call(String, List, Map)}, asynchronously. */
  public CompletableFuture<Object> callAsync(String method, List<?> args, Map<String, ?> kwargs) {
    return callAsync(method, args, kwargs, null);
  }

  /** The general call, asynchronously, completing on {@code ForkJoinPool.commonPool()}. */
  public CompletableFuture<Object> callAsync(
      String method, List<?> args, Map<String, ?> kwargs, CallOptions options) {
    return callAsync(method, args, kwargs, options, AsyncCall.DEFAULT_EXECUTOR);
  }

  /**
   * Submits {@link #call(String, List, Map, CallOptions)} and returns at once: the method runs on
   * one of the process's host worker threads (as many as cores), in submission order, and the
   * future completes through `executor`, as {@link ReplicatedObject#callAsync(String, List, Map,
   * CallOptions, Executor)} describes (cancel, the options' token and timeout, refusals thrown
   * here). TorchScript has no pool, so no queue limit applies. Closing the module after submitting
   * is safe: the call holds it.
   */
  public CompletableFuture<Object> callAsync(
      String method, List<?> args, Map<String, ?> kwargs, CallOptions options, Executor executor) {
    return with(
        module ->
            AsyncCall.submit(
                args,
                kwargs,
                options,
                executor,
                (a, k, o, done) ->
                    ManypyNative.manypy_jni_script_call_async(module, method, a, k, o, done)));
  }

  /**
   * Saves the module (torch.jit.save) to `path` with `extraFiles` (name to byte[] or String; may be
   * null) as "extra/&lt;name&gt;", plus the export hook's.
   */
  public void save(Path path, Map<String, ?> extraFiles) {
    String file = path.toString();
    Values.withDict(
        extraFiles,
        extra -> check(module -> ManypyNative.manypy_script_save_file(module, file, extra)));
  }

  /** Intra-op threads of the host's libtorch for TorchScript calls (threads not yet used). */
  public static void setIntraOpThreads(int threads) {
    NativeLibrary.ensureLoaded();
    Status.check(ManypyNative.manypy_script_set_intra_op_threads(threads));
  }
}
