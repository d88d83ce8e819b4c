package org.manypy;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.manypy.internal.ManypyNative;

/**
 * A TorchScript module run by libtorch in the host process: no Python, no
 * interpreter. Thread safe: any number of threads may call it at once.
 */
public final class ScriptModule extends NativeResource {
  private ScriptModule(long handle) {
    super(handle, ManypyNative::manypy_script_free, "ScriptModule");
  }

  /** Loads a TorchScript archive (torch.jit.save). */
  public static ScriptModule load(Path archive) {
    NativeLibrary.ensureLoaded();
    long[] out = new long[1];
    Status.check(ManypyNative.manypy_script_load_file(archive.toString(), out));
    return new ScriptModule(out[0]);
  }

  /** Loads a TorchScript archive from memory. */
  public static ScriptModule load(byte[] archive) {
    NativeLibrary.ensureLoaded();
    long[] out = new long[1];
    Status.check(ManypyNative.manypy_script_load_bytes(archive, out));
    return new ScriptModule(out[0]);
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
   * Calls `method` (null: forward) in inference mode with `options` (may be
   * null): their timeout or deadline and cancel token stop the method before
   * its next tensor operator ({@link DeadlineExceededException}, {@link
   * CancelledException}), and operator callbacks report their context. Their
   * interpreter index is ignored: there is no interpreter.
   */
  public Object call(String method, List<?> args, Map<String, ?> kwargs, CallOptions options) {
    long module = acquire();
    try {
      long nativeOptions = options == null ? 0 : options.acquire();
      try {
        return Values.call(args, kwargs, (a, k, out) ->
            ManypyNative.manypy_script_call(module, method, a, k, nativeOptions, out));
      } finally {
        if (options != null) options.release();
      }
    } finally {
      release();
    }
  }

  /**
   * Saves the module (torch.jit.save) to `path` with `extraFiles` (name to
   * byte[] or String; may be null) as "extra/&lt;name&gt;", plus the export hook's.
   */
  public void save(Path path, Map<String, ?> extraFiles) {
    Values.withDict(extraFiles, extra -> {
      long module = acquire();
      try {
        Status.check(ManypyNative.manypy_script_save_file(module, path.toString(), extra));
      } finally {
        release();
      }
    });
  }

  /** Intra-op threads of the host's libtorch for TorchScript calls (threads not yet used). */
  public static void setIntraOpThreads(int threads) {
    NativeLibrary.ensureLoaded();
    Status.check(ManypyNative.manypy_script_set_intra_op_threads(threads));
  }
}
