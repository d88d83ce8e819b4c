package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Java values to Python and back, through eval and an identity object. */
class ValuesTest extends IdentityModelTest {
  @Test
  void pythonResultsBecomeJavaValues() {
    assertNull(pool.eval("None"));
    assertEquals(true, pool.eval("1 < 2"));
    assertEquals(-(1L << 62), pool.eval("-(1 << 62)"));
    assertEquals(0.25, pool.eval("1 / 4"));
    assertEquals(
        "snake \uD83D\uDC0D and NUL \0 inside",
        pool.eval("'snake \\U0001F40D and NUL \\x00 inside'"));
    assertArrayEquals(new byte[] {0, (byte) 255}, (byte[]) pool.eval("b'\\x00\\xff'"));
    assertEquals(List.of(1L, "two"), pool.eval("[1, 'two']"));
    assertEquals(Tuple.of(1L, null), pool.eval("(1, None)"));
    Object dict = pool.eval("{'z': 1, 'a': [2.5, (True,)]}");
    assertEquals(List.of("z", "a"), new ArrayList<>(((Map<?, ?>) dict).keySet()));
    assertEquals(List.of(2.5, Tuple.of(true)), ((Map<?, ?>) dict).get("a"));
    try (Tensor t = (Tensor) pool.eval("__import__('torch').arange(3)")) {
      assertArrayEquals(new long[] {0, 1, 2}, t.toLongArray());
    }
  }

  @Test
  void dictKeysWithNulReadBackWhole() {
    Map<?, ?> dict = (Map<?, ?>) pool.eval("{'a\\x00b': 1, '\\x00': 2, 'plain': 3}");
    assertEquals(List.of("a\0b", "\0", "plain"), new ArrayList<>(dict.keySet()));
    assertEquals(1L, dict.get("a\0b"));
    assertEquals(2L, dict.get("\0"));
    // Nested, in the result of a Python function.
    pool.exec(0, "def keyed():\n    return {'x': {'k\\x00\\U0001F40D': [True]}}");
    Map<?, ?> outer = (Map<?, ?>) pool.eval("keyed()");
    assertEquals(Map.of("k\0\uD83D\uDC0D", List.of(true)), outer.get("x"));
  }

  @Test
  void javaValuesReachPythonIntact() {
    pool.exec(0, "def describe(x):\n    return repr(x)");
    // identity's forward returns its argument unchanged, whatever it is.
    Map<String, Object> nested = new LinkedHashMap<>();
    nested.put("b", List.of(1, 2.5f, (short) 3, (byte) 4));
    nested.put("a", Tuple.of("\uD83D\uDC0D", new byte[] {1}, null, false));
    @SuppressWarnings("unchecked")
    Map<String, Object> back = (Map<String, Object>) identity.call(nested);
    assertEquals(List.of("b", "a"), new ArrayList<>(back.keySet()));
    assertEquals(List.of(1L, 2.5, 3L, 4L), back.get("b"));
    Tuple tuple = (Tuple) back.get("a");
    assertEquals("\uD83D\uDC0D", tuple.get(0));
    assertArrayEquals(new byte[] {1}, (byte[]) tuple.get(1));
    assertNull(tuple.get(2));
    assertEquals(false, tuple.get(3));
  }

  @Test
  void unsupportedValuesAreClearErrors() {
    IllegalArgumentException javaSide =
        assertThrows(IllegalArgumentException.class, () -> identity.call(new java.util.Date()));
    assertTrue(javaSide.getMessage().contains("java.util.Date"), javaSide.getMessage());
    assertThrows(IllegalArgumentException.class, () -> identity.call(Map.of("k", new Object())));
    Map<Object, Object> badKey = new LinkedHashMap<>();
    badKey.put(1, 2);
    assertThrows(IllegalArgumentException.class, () -> identity.call(badKey));
    UnsupportedTypeException pythonSide =
        assertThrows(UnsupportedTypeException.class, () -> pool.eval("object()"));
    assertEquals(ErrorCode.UNSUPPORTED_TYPE, pythonSide.code());
    assertThrows(OutOfRangeException.class, () -> pool.eval("1 << 70"));
    // A C string cannot carry NUL: refused before it reaches native code.
    assertThrows(IllegalArgumentException.class, () -> pool.eval("'a\0b'"));
  }
}
