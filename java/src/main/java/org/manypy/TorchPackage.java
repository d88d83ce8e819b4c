package org.manypy;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.manypy.internal.ManypyNative;

/**
 * A torch.package archive loaded into a pool (java.lang.Package is taken). Keeps its pool alive.
 * Thread safe.
 */
public final class TorchPackage extends NativeResource {
  TorchPackage(long handle) {
    super(handle, ManypyNative::manypy_package_free, "TorchPackage");
  }

  /**
   * Unpickles `module`/`name` (torch.package's load_pickle) into a replicated object: now in one
   * interpreter, so errors surface here (ModuleNotFoundException for a missing extern,
   * BadArchiveException for a corrupt record), and lazily in the others.
   */
  public ReplicatedObject loadPickle(String module, String name) {
    return with(
        pkg ->
            new ReplicatedObject(
                Values.out(
                    out -> ManypyNative.manypy_package_load_pickle(pkg, module, name, out))));
  }

  /** The names of the archive's records, read without Python. */
  public List<String> listFiles() {
    return stringList(
        with(pkg -> Values.result(out -> ManypyNative.manypy_package_list_files(pkg, out))));
  }

  /** One record's bytes; NoSuchNameException if there is none. */
  public byte[] readFile(String name) {
    return (byte[])
        with(pkg -> Values.result(out -> ManypyNative.manypy_package_read_file(pkg, name, out)));
  }

  /**
   * Writes a copy of the archive to `path` with `extraFiles` (name to byte[] or String; may be
   * null) stored as "extra/&lt;name&gt;", plus the export hook's files. The copy loads like the
   * original.
   */
  public void save(Path path, Map<String, ?> extraFiles) {
    String file = path.toString();
    Values.withDict(
        extraFiles, extra -> check(pkg -> ManypyNative.manypy_package_save_file(pkg, file, extra)));
  }

  static List<String> stringList(Object list) {
    List<String> names = new ArrayList<>();
    for (Object o : (List<?>) list) names.add((String) o);
    return names;
  }
}
