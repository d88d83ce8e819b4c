package org.manypy;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Turns the dynamic loader's message for a library that would not load (UnsatisfiedLinkError
 * carries dlerror()'s text) into what to do about it. The common case on a fresh machine is a
 * missing libtorch: manypy links the libtorch its interpreters import, Debian's python3-torch.
 */
final class LinkErrors {
  // glibc: "<file>: <needed>: cannot open shared object file: No such file or directory"
  private static final Pattern MISSING =
      Pattern.compile("([^\\s:/]+\\.so[^\\s:]*): cannot open shared object file");

  private LinkErrors() {}

  /**
   * The message for `error` raised loading `tried`; `builtFor` names the torch build the natives
   * were made for ("torch 1.13.1, CPython 3.11"), or is null when that is not known (natives from
   * outside the jar).
   */
  static String explain(String tried, UnsatisfiedLinkError error, String builtFor) {
    String message = String.valueOf(error.getMessage());
    String head = "manypy: could not load " + tried + ": " + message + ". ";
    String natives =
        builtFor == null ? "these natives" : "these natives (built for " + builtFor + ")";
    Matcher missing = MISSING.matcher(message);
    if (missing.find()) {
      String needed = missing.group(1);
      if (needed.startsWith("libtorch") || needed.startsWith("libc10")) {
        return head
            + "libtorch is not installed: "
            + natives
            + " need "
            + needed
            + ", which Debian's python3-torch provides: install python3-torch (apt-get install python3-torch,"
            + " which brings libtorch"
            + sonameVersion(needed)
            + "), or use natives built for the torch you have"
            + " (-D"
            + NativeLibrary.NATIVE_PATH_PROPERTY
            + "=<dir>).";
      }
      if (needed.startsWith("libpython")) {
        return head
            + natives
            + " need "
            + needed
            + ": install the Python they were built for"
            + " (Debian: apt-get install python3-torch, which brings it).";
      }
      if (needed.startsWith("libmanypy")) {
        return head
            + needed
            + " was found neither beside "
            + tried
            + " nor on the library search path:"
            + " keep the natives' directory whole (libmanypy_jni.so, "
            + needed
            + ", manypy/), or install"
            + " the Debian package libmanypy"
            + sonameVersion(needed)
            + ".";
      }
      return head
          + "A library it needs, "
          + needed
          + ", is not installed: install the package that provides it.";
    }
    if (message.contains("failed to map segment") || message.contains("Operation not permitted")) {
      return head
          + "The directory may be on a file system mounted noexec: move the cache elsewhere with -D"
          + NativeBundle.CACHE_PROPERTY
          + "=<dir>, or use natives installed on disk (-D"
          + NativeLibrary.NATIVE_PATH_PROPERTY
          + "=<dir>).";
    }
    return head
        + "Point -D"
        + NativeLibrary.NATIVE_PATH_PROPERTY
        + "=<file or directory> (or "
        + NativeLibrary.NATIVE_PATH_ENV
        + ") at libmanypy_jni.so, or put its directory on -Djava.library.path.";
  }

  /** "1.13" of "libtorch_cpu.so.1.13", "0.3" of "libmanypy.so.0.3"; "" if none. */
  private static String sonameVersion(String soname) {
    int at = soname.indexOf(".so.");
    return at < 0 ? "" : soname.substring(at + 4);
  }
}
