package org.manypy;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeMap;

/**
 * The native libraries a jar carries in its resources (the Maven artifact does; the plain jar of
 * the Debian package does not), and their extraction into a per-user cache directory.
 *
 * <p>Layout, written by scripts/package/maven.sh:
 *
 * <pre>
 * org/manypy/native/platforms.properties        platform = "torch X, CPython Y", one per platform
 * org/manypy/native/&lt;platform&gt;/manypy-native.properties
 *     version, platform, torch, python, jni (the file to load),
 *     files (comma-separated), sha256.&lt;file&gt; for each
 * org/manypy/native/&lt;platform&gt;/libmanypy_jni.so, libmanypy.so.0.3, manypy/...
 * </pre>
 *
 * The files keep their relative layout on disk: libmanypy_jni.so finds libmanypy.so.0.3 beside
 * itself ($ORIGIN) and libmanypy.so finds its private libraries in manypy/ beside itself.
 *
 * <p>They go into {@code <cache root>/<version>-<build>/}, where build is the start of the
 * manifest's SHA-256, so every build of the natives has a directory of its own. What is on disk is
 * checked against the recorded digests before it is used; a file that does not match (corrupt, cut
 * short, another build's) is replaced by a fresh copy written to a temporary file and renamed over
 * it, so JVMs extracting at once each write whole files and never see a partial one.
 */
final class NativeBundle {
  static final String ROOT = "org/manypy/native/";
  static final String INDEX = ROOT + "platforms.properties";
  static final String MANIFEST = "manypy-native.properties";

  /** Where natives are extracted; default ${XDG_CACHE_HOME:-~/.cache}/manypy/native. */
  static final String CACHE_PROPERTY = "manypy.native.cache";

  final String platform;
  final String version;
  final String torch;
  final String python;
  final String jni;
  final String build;
  final List<String> files;
  private final Properties manifest;
  private final ClassLoader resources;

  private NativeBundle(ClassLoader resources, String platform, Properties manifest, String build) {
    this.resources = resources;
    this.platform = platform;
    this.manifest = manifest;
    this.build = build;
    this.version = required(manifest, "version", platform);
    this.torch = required(manifest, "torch", platform);
    this.python = required(manifest, "python", platform);
    this.jni = required(manifest, "jni", platform);
    List<String> list = new ArrayList<>();
    for (String file : required(manifest, "files", platform).split(",")) {
      String name = file.trim();
      if (name.isEmpty()) continue;
      // Relative, inside the bundle: a manifest must not write elsewhere.
      if (name.startsWith("/") || name.contains("..") || name.contains("\\")) {
        throw damaged("its manifest names the file \"" + name + "\" outside " + ROOT + platform);
      }
      required(manifest, "sha256." + name, platform);
      list.add(name);
    }
    if (!list.contains(jni))
      throw damaged("its manifest's jni=" + jni + " is not among its files " + list);
    this.files = Collections.unmodifiableList(list);
  }

  /**
   * The natives in `resources` for `platform`; null if there are none for any platform (a plain
   * jar). Throws OtherPlatform if there are natives, but not for this platform, naming what there
   * is.
   */
  static NativeBundle find(ClassLoader resources, String platform) {
    Properties index = read(resources, INDEX);
    if (index == null) return null;
    if (!index.containsKey(platform)) {
      List<String> held = new ArrayList<>();
      new TreeMap<>(index).forEach((p, builtFor) -> held.add(p + " (" + builtFor + ")"));
      throw new OtherPlatform(
          "manypy: this jar holds native libraries for "
              + (held.isEmpty() ? "no platform" : String.join(", ", held))
              + ", not for this JVM's platform "
              + platform
              + " (os.name="
              + System.getProperty("os.name")
              + ", os.arch="
              + System.getProperty("os.arch")
              + "). Build manypy for "
              + platform
              + " and point -D"
              + NativeLibrary.NATIVE_PATH_PROPERTY
              + "=<dir> (or "
              + NativeLibrary.NATIVE_PATH_ENV
              + ") at the directory holding its libmanypy_jni.so, or put that directory on -Djava.library.path.");
    }
    String name = ROOT + platform + "/" + MANIFEST;
    byte[] bytes = readBytes(resources, name);
    if (bytes == null) {
      throw damaged(INDEX + " lists " + platform + " but " + name + " is missing");
    }
    Properties manifest = new Properties();
    try {
      manifest.load(new java.io.StringReader(new String(bytes, StandardCharsets.UTF_8)));
    } catch (IOException | IllegalArgumentException e) {
      throw damaged(name + " cannot be read: " + e.getMessage());
    }
    String build = HexFormat.of().formatHex(sha256().digest(bytes)).substring(0, 16);
    return new NativeBundle(resources, platform, manifest, build);
  }

  /**
   * The jar has natives, but none for this platform. Not yet an error: natives installed for it may
   * be on java.library.path.
   */
  static final class OtherPlatform extends RuntimeException {
    private static final long serialVersionUID = 1L;

    OtherPlatform(String message) {
      super(message, null, false, false);
    }
  }

  /** "linux-x86_64", "linux-aarch64", ...: the names the jar's directories use. */
  static String currentPlatform() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).replace(" ", "");
    if (os.startsWith("linux")) os = "linux";
    else if (os.startsWith("mac")) os = "macos";
    else if (os.startsWith("windows")) os = "windows";
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    switch (arch) {
      case "amd64", "x86_64", "x64" -> arch = "x86_64";
      case "aarch64", "arm64" -> arch = "aarch64";
      default -> {}
    }
    return os + "-" + arch;
  }

  /** -Dmanypy.native.cache, else $XDG_CACHE_HOME/manypy/native, else ~/.cache/manypy/native. */
  static Path defaultCacheRoot() {
    String property = System.getProperty(CACHE_PROPERTY);
    if (property != null && !property.isEmpty()) return Path.of(property);
    String xdg = System.getenv("XDG_CACHE_HOME");
    // The XDG spec: a relative path is invalid and is ignored.
    if (xdg != null && !xdg.isEmpty() && Path.of(xdg).isAbsolute()) {
      return Path.of(xdg, "manypy", "native");
    }
    return Path.of(System.getProperty("user.home"), ".cache", "manypy", "native");
  }

  /** The directory of this build under `cacheRoot`. */
  Path directory(Path cacheRoot) {
    return cacheRoot.resolve(version + "-" + build);
  }

  /** What the natives were built against, for messages: "torch 1.13.1, CPython 3.11". */
  String builtFor() {
    return "torch " + torch + ", CPython " + python;
  }

  /**
   * Makes sure every file is in `cacheRoot`'s directory for this build with its recorded digest,
   * writing only those that are not, and returns the path of the library to load.
   */
  Path extract(Path cacheRoot) {
    Path dir = directory(cacheRoot).toAbsolutePath();
    for (String file : files) {
      Path target = dir.resolve(file);
      String expected = expected(file);
      if (expected.equals(digestOrNull(target))) continue;
      write(dir, file, target, expected);
      // Checked again as it is now on disk: what gets loaded is what was recorded.
      String actual = digestOrNull(target);
      if (!expected.equals(actual)) {
        throw new LibraryLoadException(
            "manypy: digest mismatch for "
                + target
                + ": expected SHA-256 "
                + expected
                + ", found "
                + (actual == null ? "no readable file" : actual)
                + " right after writing it."
                + " Something else is writing into "
                + dir
                + "; give this JVM a cache of its own with -D"
                + CACHE_PROPERTY
                + "=<dir>.",
            null);
      }
    }
    return dir.resolve(jni);
  }

  private void write(Path dir, String file, Path target, String expected) {
    Path tmp;
    try {
      Files.createDirectories(target.getParent());
      tmp = Files.createTempFile(target.getParent(), "." + target.getFileName() + ".", ".tmp");
    } catch (IOException | UnsupportedOperationException | SecurityException e) {
      throw unwritable(dir, e);
    }
    try {
      String resource = ROOT + platform + "/" + file;
      MessageDigest digest = sha256();
      try (InputStream in = resources.getResourceAsStream(resource);
          OutputStream out = Files.newOutputStream(tmp)) {
        if (in == null)
          throw damaged("its manifest lists " + file + " but " + resource + " is missing");
        byte[] buffer = new byte[1 << 16];
        for (int n; (n = in.read(buffer)) > 0; ) {
          digest.update(buffer, 0, n);
          out.write(buffer, 0, n);
        }
      }
      String actual = HexFormat.of().formatHex(digest.digest());
      if (!actual.equals(expected)) {
        throw new LibraryLoadException(
            "manypy: digest mismatch for "
                + resource
                + " in this jar: expected SHA-256 "
                + expected
                + " (recorded when the jar was built), found "
                + actual
                + ". The jar is damaged or was altered: download it again.",
            null);
      }
      // rename(2): atomic, and it replaces a corrupt or foreign file. A JVM
      // that has the old one mapped keeps its inode.
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      throw unwritable(dir, e);
    } finally {
      try {
        Files.deleteIfExists(tmp);
      } catch (IOException ignored) {
        // A stray temporary file: harmless, and named so it is recognisable.
      }
    }
  }

  private String expected(String file) {
    return manifest.getProperty("sha256." + file).trim().toLowerCase(Locale.ROOT);
  }

  static LibraryLoadException unwritable(Path dir, Exception e) {
    String reason;
    if (e instanceof FileAlreadyExistsException f) {
      reason = f.getFile() + " exists and is not a directory";
    } else if (e instanceof AccessDeniedException a) {
      reason = "permission denied on " + a.getFile();
    } else if (e instanceof NoSuchFileException n) {
      reason = n.getFile() + " does not exist";
    } else {
      reason = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    }
    LibraryLoadException error =
        new LibraryLoadException(
            "manypy: cannot write the native libraries bundled in this jar into the cache directory "
                + dir
                + " ("
                + reason
                + "). Point -D"
                + CACHE_PROPERTY
                + "=<dir> at a writable directory"
                + " (the default is ${XDG_CACHE_HOME:-~/.cache}/manypy/native), or load natives already on disk"
                + " with -D"
                + NativeLibrary.NATIVE_PATH_PROPERTY
                + "=<dir> or "
                + NativeLibrary.NATIVE_PATH_ENV
                + ".",
            e);
    return error;
  }

  private static LibraryLoadException damaged(String what) {
    return new LibraryLoadException(
        "manypy: the native libraries bundled in this jar are unusable: "
            + what
            + ". The jar is damaged or was not built by scripts/package/maven.sh: download it again.",
        null);
  }

  private static String required(Properties p, String key, String platform) {
    String value = p.getProperty(key);
    if (value == null || value.trim().isEmpty()) {
      throw damaged(ROOT + platform + "/" + MANIFEST + " has no " + key);
    }
    return value.trim();
  }

  /** The SHA-256 of `file` in hex, or null if it is not a readable regular file. */
  static String digestOrNull(Path file) {
    if (!Files.isRegularFile(file)) return null;
    MessageDigest digest = sha256();
    try (InputStream in = Files.newInputStream(file)) {
      byte[] buffer = new byte[1 << 16];
      for (int n; (n = in.read(buffer)) > 0; ) digest.update(buffer, 0, n);
    } catch (IOException e) {
      return null;
    }
    return HexFormat.of().formatHex(digest.digest());
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }

  private static Properties read(ClassLoader resources, String name) {
    byte[] bytes = readBytes(resources, name);
    if (bytes == null) return null;
    Properties p = new Properties();
    try {
      p.load(new java.io.StringReader(new String(bytes, StandardCharsets.UTF_8)));
    } catch (IOException | IllegalArgumentException e) {
      throw damaged(name + " cannot be read: " + e.getMessage());
    }
    return p;
  }

  private static byte[] readBytes(ClassLoader resources, String name) {
    try (InputStream in = resources.getResourceAsStream(name)) {
      return in == null ? null : in.readAllBytes();
    } catch (IOException e) {
      throw damaged(name + " cannot be read: " + e.getMessage());
    }
  }
}
