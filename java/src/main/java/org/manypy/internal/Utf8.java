package org.manypy.internal;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Strings across the JNI layer as real UTF-8 (JNI's own string functions use "modified UTF-8",
 * which encodes NUL and characters outside the BMP differently from the UTF-8 manypy checks for).
 */
public final class Utf8 {
  private Utf8() {}

  /** NUL-terminated UTF-8 for a C string parameter; null stays null. */
  public static byte[] cstring(String s) {
    if (s == null) return null;
    if (s.indexOf('\0') >= 0) {
      throw new IllegalArgumentException(
          "manypy: a string passed as a C string must not contain NUL (U+0000)");
    }
    byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
    return Arrays.copyOf(bytes, bytes.length + 1);
  }

  /** UTF-8 bytes, without a terminator (strings may then contain NUL). */
  public static byte[] encode(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** Decodes UTF-8 bytes; null stays null. */
  public static String decode(byte[] bytes) {
    return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
  }
}
