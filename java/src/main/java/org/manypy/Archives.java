package org.manypy;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.manypy.internal.ManypyNative;

/**
 * Reads and copies any PyTorch archive (TorchScript, torch.package or an AOTInductor .pt2 package)
 * with libtorch's reader and writer, without Python and without running any of it: for example the
 * metadata an export hook stamped. Thread safe.
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

  /**
   * Writes a copy of the archive at `archive` to `copy` with `extraFiles` (name to byte[] or
   * String; may be null) stored as "extra/&lt;name&gt;" (replacing records of those names), plus
   * the export hook's files ({@link Manypy#setExportHook}; the caller's win): how a pipeline stamps
   * metadata on an archive it did not write through manypy. The copy loads like the original, but
   * its digest differs: a trust must list it anew. Errors as {@link #listFiles}, and {@link
   * NotFoundException} for a `copy` that cannot be written.
   */
  public static void saveCopy(Path archive, Path copy, Map<String, ?> extraFiles) {
    NativeLibrary.ensureLoaded();
    String from = archive.toString();
    String to = copy.toString();
    Values.withDict(
        extraFiles, extra -> Status.check(ManypyNative.manypy_archive_save_copy(from, to, extra)));
  }
}
