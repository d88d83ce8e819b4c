package org.manypy;

import java.nio.file.Files;
import java.nio.file.Path;
import org.manypy.internal.ManypyNative;
import org.manypy.internal.ManypyNativeConstants;

/**
 * Loads libmanypy_jni.so (which pulls in libmanypy.so beside it) once, and
 * checks that the three pieces agree: this jar, the JNI library built with
 * it, and the libmanypy.so the loader found.
 *
 * <p>Where from, in order: {@link Manypy#load(Path)}; the system property
 * {@value #PATH_PROPERTY} (the library file, or its directory); the JVM's
 * java.library.path.
 */
final class NativeLibrary {
  static final String PATH_PROPERTY = "manypy.library.path";
  static final String NAME = "manypy_jni";

  private static volatile boolean loaded;
  // A version mismatch is permanent: the wrong library stays loaded.
  private static LibraryLoadException permanentFailure;

  private NativeLibrary() {}

  /** Loads from the default places if nothing is loaded yet. */
  static void ensureLoaded() {
    if (!loaded) load(null);
  }

  /**
   * Loads the library if need be and returns the handle `make` returns (a C
   * constructor that signals running out of native memory with NULL).
   */
  static long newHandle(java.util.function.LongSupplier make) {
    ensureLoaded();
    return NativeResource.allocated(make.getAsLong());
  }

  /** Loads from `path` (a file or a directory), or the default places if null. */
  static synchronized void load(Path path) {
    if (loaded) return;
    if (permanentFailure != null) throw copy(permanentFailure);
    String property = System.getProperty(PATH_PROPERTY);
    if (path == null && property != null && !property.isEmpty()) path = Path.of(property);
    Path file = path == null ? null
        : Files.isDirectory(path) ? path.resolve(System.mapLibraryName(NAME)) : path;
    String tried = file != null ? file.toAbsolutePath().toString()
        : System.mapLibraryName(NAME) + " from java.library.path ("
            + System.getProperty("java.library.path") + ")";
    try {
      if (file != null) {
        System.load(tried);
      } else {
        System.loadLibrary(NAME);
      }
    } catch (UnsatisfiedLinkError e) {
      throw new LibraryLoadException(
          "manypy: could not load " + tried + ": " + e.getMessage()
              + ". Put the directory holding libmanypy_jni.so and libmanypy.so on"
              + " -Djava.library.path, or set -D" + PATH_PROPERTY + "=<file or directory>.",
          e);
    }
    checkVersions(tried);
    loaded = true;
  }

  private static void checkVersions(String tried) {
    int jar = ManypyNativeConstants.MANYPY_VERSION_NUMBER;
    int glue = ManypyNative.manypy_jni_glue_version();
    long library = ManypyNative.manypy_version_number();
    String problem = null;
    if (glue != jar) {
      problem = "the JNI library " + tried + " was built for manypy " + version(glue)
          + " but this jar is " + version(jar) + ": use the libmanypy_jni.so built with this jar";
    } else if (!compatible(jar, library)) {
      problem = "libmanypy.so is version " + version(library) + " but this jar needs "
          + abi(jar) + ": use the libmanypy.so this jar was built with";
    }
    if (problem != null) {
      permanentFailure = new LibraryLoadException("manypy: " + problem, null);
      throw copy(permanentFailure);
    }
  }

  /**
   * The ABI rule of manypy.h (docs/c-api.md): the same major; while the
   * major is 0, the same minor too (any patch); from 1.0 on, a library
   * minor at least the jar's.
   */
  static boolean compatible(long jar, long library) {
    long major = jar / 10000;
    long jarMinor = jar / 100 % 100;
    long libraryMinor = library / 100 % 100;
    if (library / 10000 != major) return false;
    return major == 0 ? libraryMinor == jarMinor : libraryMinor >= jarMinor;
  }

  /** The library versions `jar` accepts, for messages: "0.2.x", "1.3 or a later 1.x". */
  static String abi(long jar) {
    long major = jar / 10000;
    long minor = jar / 100 % 100;
    return major == 0 ? "0." + minor + ".x" : major + "." + minor + " or a later " + major + ".x";
  }

  static String version(long number) {
    return (number / 10000) + "." + (number / 100 % 100) + "." + (number % 100);
  }

  private static LibraryLoadException copy(LibraryLoadException e) {
    return new LibraryLoadException(e.getMessage(), e.getCause());
  }
}
