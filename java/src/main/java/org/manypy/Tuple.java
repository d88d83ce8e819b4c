package org.manypy;

import java.util.AbstractList;
import java.util.Arrays;
import java.util.List;

/**
 * A Python tuple: an immutable list. Passed to Python as a tuple (a java.util.List is passed as a
 * list); Python tuples come back as Tuples.
 */
public final class Tuple extends AbstractList<Object> {
  private final Object[] items;

  private Tuple(Object[] items) {
    this.items = items;
  }

  /** A tuple of the given items (null is None). */
  public static Tuple of(Object... items) {
    return new Tuple(items.clone());
  }

  /** A tuple of a list's items. */
  public static Tuple copyOf(List<?> items) {
    return new Tuple(items.toArray());
  }

  @Override
  public Object get(int index) {
    return items[index];
  }

  @Override
  public int size() {
    return items.length;
  }

  @Override
  public String toString() {
    String inner = Arrays.toString(items);
    return "(" + inner.substring(1, inner.length() - 1) + (items.length == 1 ? ",)" : ")");
  }
}
