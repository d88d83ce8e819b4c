package org.manypy;

import java.nio.file.Files;
import java.nio.file.Path;
import org.manypy.internal.ManypyNative;
import org.manypy.internal.ManypyNativeConstants;

/**
 * Loads libmanypy_jni.so (which pulls in libmanypy.so beside it) once, and checks that the three
 * pieces agree: this jar, the JNI library built with it, and the libmanypy.so the loader found.
 *
 * <p>Where from, the first that applies (docs/java.md, "Installing"):
 *
 * <ol>
 *   <li>{@link Manypy#load(Path)};
 *   <li>the system property {@value #NATIVE_PATH_PROPERTY} (or its older name {@value
 *       #LIBRARY_PATH_PROPERTY}), else the environment variable {@value #NATIVE_PATH_ENV}: the
 *       library file, or its directory;
 *   <li>the natives bundled in this jar for this platform (NativeBundle), extracted into the
 *       per-user cache;
 *   <li>the JVM's java.library.path (where Debian's OpenJDK finds the libmanypy-java package's
 *       /usr/lib/jni).
 * </ol>
 */
final class NativeLibrary {
  static final String NATIVE_PATH_PROPERTY = "manypy.native.path";

  /** The name before 0.3, still honoured. */
  static final String LIBRARY_PATH_PROPERTY = "manypy.library.path";

  static final String NATIVE_PATH_ENV = "MANYPY_NATIVE_PATH";
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
   * Loads the library if need be and returns the handle `make` returns (a C constructor that
   * signals running out of native memory with NULL).
   */
  static long newHandle(java.util.function.LongSupplier make) {
    ensureLoaded();
    return NativeResource.allocated(make.getAsLong());
  }

  /** Loads from `path` (a file or a directory), or the default places if null. */
  static synchronized void load(Path path) {
    if (loaded) return;
    if (permanentFailure != null) throw copy(permanentFailure);
    if (path == null) path = configuredPath();
    if (path != null) {
      loadFile(file(path), null);
    } else {
      loadDefault(NativeLibrary.class.getClassLoader(), NativeBundle.defaultCacheRoot());
    }
    loaded = true;
  }

  /**
   * As load(null), with the bundle read from `resources` and extracted under `cacheRoot` (tests).
   */
  static synchronized void loadBundled(ClassLoader resources, Path cacheRoot) {
    if (loaded) return;
    if (permanentFailure != null) throw copy(permanentFailure);
    loadDefault(resources, cacheRoot);
    loaded = true;
  }

  /** The path the property, its alias or the environment names; null if none. */
  static Path configuredPath() {
    for (String property : new String[] {NATIVE_PATH_PROPERTY, LIBRARY_PATH_PROPERTY}) {
      String value = System.getProperty(property);
      if (value != null && !value.isEmpty()) return Path.of(value);
    }
    String env = System.getenv(NATIVE_PATH_ENV);
    return env != null && !env.isEmpty() ? Path.of(env) : null;
  }

  private static Path file(Path path) {
    return Files.isDirectory(path) ? path.resolve(System.mapLibraryName(NAME)) : path;
  }

  /** The jar's natives for this platform, else java.library.path. */
  private static void loadDefault(ClassLoader resources, Path cacheRoot) {
    NativeBundle.OtherPlatform otherPlatform = null;
    try {
      NativeBundle bundle = NativeBundle.find(resources, NativeBundle.currentPlatform());
      if (bundle != null) {
        loadFile(bundle.extract(cacheRoot), bundle.builtFor());
        return;
      }
    } catch (NativeBundle.OtherPlatform e) {
      otherPlatform = e; // natives installed for this platform may still be on java.library.path
    }
    String tried =
        System.mapLibraryName(NAME)
            + " from java.library.path ("
            + System.getProperty("java.library.path")
            + ")";
    try {
      System.loadLibrary(NAME);
    } catch (UnsatisfiedLinkError e) {
      if (otherPlatform != null) {
        throw new LibraryLoadException(
            otherPlatform.getMessage() + " (" + tried + " failed too: " + e.getMessage() + ")", e);
      }
      String message =
          e.getMessage() != null && e.getMessage().startsWith("no " + NAME + " in")
              ? "manypy: this jar carries no native libraries and "
                  + tried
                  + " was not found. Install the"
                  + " natives (Debian: apt-get install libmanypy-java puts libmanypy_jni.so in"
                  + " /usr/lib/jni), use the Maven artifact org.manypy:manypy, which carries"
                  + " them, or point -D"
                  + NATIVE_PATH_PROPERTY
                  + "=<dir> (or "
                  + NATIVE_PATH_ENV
                  + ") at the directory holding libmanypy_jni.so."
              : LinkErrors.explain(tried, e, null);
      throw new LibraryLoadException(message, e);
    }
    checkVersions(tried);
  }

  private static void loadFile(Path file, String builtFor) {
    String tried = file.toAbsolutePath().toString();
    try {
      System.load(tried);
    } catch (UnsatisfiedLinkError e) {
      throw new LibraryLoadException(LinkErrors.explain(tried, e, builtFor), e);
    }
    checkVersions(tried);
  }

  private static void checkVersions(String tried) {
    int jar = ManypyNativeConstants.MANYPY_VERSION_NUMBER;
    int glue = ManypyNative.manypy_jni_glue_version();
    long library = ManypyNative.manypy_version_number();
    String problem = null;
    if (glue != jar) {
      problem =
          "the JNI library "
              + tried
              + " was built for manypy "
              + version(glue)
              + " but this jar is "
              + version(jar)
              + ": use the libmanypy_jni.so built with this jar";
    } else if (!compatible(jar, library)) {
      problem =
          "libmanypy.so is version "
              + version(library)
              + " but this jar needs "
              + abi(jar)
              + ": use the libmanypy.so this jar was built with";
    }
    if (problem != null) {
      permanentFailure = new LibraryLoadException("manypy: " + problem, null);
      throw copy(permanentFailure);
    }
  }

  /**
   * The ABI rule of manypy.h (docs/c-api.md): the same major; while the major is 0, the same minor
   * too (any patch); from 1.0 on, a library minor at least the jar's.
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
