package org.manypy;

import java.nio.file.Path;
import java.util.List;
import org.manypy.internal.ManypyNative;

/**
 * Reads any PyTorch archive (TorchScript or torch.package) with libtorch's
 * reader, without Python: for example the metadata an export hook stamped.
 */
public final class Archives {
  private Archives() {}

  /** Every record's name, e.g. "extra/producer_info.json". */
  public static List<String> listFiles(Path archive) {
    NativeLibrary.ensureLoaded();
    long[] out = new long[1];
    Status.check(ManypyNative.manypy_archive_list_files(archive.toString(), out));
    return TorchPackage.stringList(Values.takeResult(out[0]));
  }

  /** One record's bytes (extra files are "extra/&lt;name&gt;"); NoSuchNameException if absent. */
  public static byte[] readFile(Path archive, String name) {
    NativeLibrary.ensureLoaded();
    long[] out = new long[1];
    Status.check(ManypyNative.manypy_archive_read_file(archive.toString(), name, out));
    return (byte[]) Values.takeResult(out[0]);
  }
}
