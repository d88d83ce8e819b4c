package org.manypy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.function.Consumer;
import org.manypy.internal.ManypyNative;

/**
 * A CPU tensor crossing between Java and Python without copies.
 *
 * <p>Made from Java arrays ({@link #of(float[], long...)} and friends: one copy into native memory,
 * then none per call) or over a writable direct {@link ByteBuffer} ({@link #fromBuffer}: zero copy;
 * Python sees the buffer's memory, and the buffer is kept alive while any interpreter holds the
 * tensor). Results of calls are Java's alone: Tensors over the memory Python produced, without a
 * copy when nothing in the interpreter can reach it once the call has dropped its references, and
 * over a copy otherwise (a weight read through getAttr, a tensor the model keeps), so no model
 * writes a result after its call returned unless Java passes it to another call. Read them with
 * {@link #buffer()} or copy them out with {@code toFloatArray()} and friends.
 *
 * <p>Who may write a lent buffer: a tensor passed to a call is a torch tensor over the Tensor's
 * memory, and torch tensors are writable. The model may change it in place during the call, and, if
 * it keeps the tensor, later, during another call on another thread. So {@link #fromBuffer} lends
 * only writable direct buffers; it copies read-only ones ({@link ByteBuffer#isReadOnly()}, such as
 * a {@code FileChannel.map(READ_ONLY, ...)} mapping) and heap buffers. A Tensor's memory, and a
 * lent buffer, may change under Java code that reads it while a model holds the tensor: Java then
 * reads old or new values (a race, not a crash).
 *
 * <p>A result Tensor holds native memory until {@link #close()} (or garbage collection). The buffer
 * returned by {@link #buffer()} is only valid while its Tensor is open and reachable: keep the
 * Tensor, not just its buffer. Thread safety: a Tensor may be read and passed to calls from any
 * number of threads; writing its memory while a call reads it is a data race.
 */
public final class Tensor implements AutoCloseable {
  private static final ByteOrder NATIVE = ByteOrder.nativeOrder();

  private final DType dtype;
  private final long[] shape;
  private final long[] strides; // in elements
  private final boolean contiguous;
  // Element 0 at index 0, native byte order. For a result, made on first use:
  // a result that is only passed on or closed never pays for a ByteBuffer.
  private volatile ByteBuffer data;
  private final NativeTensor owner; // this Tensor's reference to its manypy_tensor

  /** One reference to a manypy_tensor (the C API's shared, refcounted tensor). */
  private static final class NativeTensor extends NativeResource {
    NativeTensor(long address) {
      super(address, ManypyNative::manypy_tensor_release, "Tensor");
    }
  }

  private Tensor(DType dtype, long[] shape, long[] strides, ByteBuffer data, NativeTensor owner) {
    this.dtype = dtype;
    this.shape = shape;
    long[] dense = contiguousStrides(shape);
    this.strides = strides != null ? strides : dense;
    this.contiguous = Arrays.equals(this.strides, dense);
    this.data = data;
    this.owner = owner;
  }

  // ---- from Java arrays (copied once into native memory) ------------------

  /** A float32 tensor of `data` (copied), shaped `shape` (1-D if omitted). */
  public static Tensor of(float[] data, long... shape) {
    return ofArray(DType.FLOAT32, data.length, shape, b -> b.asFloatBuffer().put(data));
  }

  /** A float64 tensor of `data` (copied). */
  public static Tensor of(double[] data, long... shape) {
    return ofArray(DType.FLOAT64, data.length, shape, b -> b.asDoubleBuffer().put(data));
  }

  /** An int64 tensor of `data` (copied). */
  public static Tensor of(long[] data, long... shape) {
    return ofArray(DType.INT64, data.length, shape, b -> b.asLongBuffer().put(data));
  }

  /** An int32 tensor of `data` (copied). */
  public static Tensor of(int[] data, long... shape) {
    return ofArray(DType.INT32, data.length, shape, b -> b.asIntBuffer().put(data));
  }

  /** An int16 tensor of `data` (copied). */
  public static Tensor of(short[] data, long... shape) {
    return ofArray(DType.INT16, data.length, shape, b -> b.asShortBuffer().put(data));
  }

  /** An int8 tensor of `data` (copied); see {@link #ofUint8} for uint8. */
  public static Tensor of(byte[] data, long... shape) {
    return ofArray(DType.INT8, data.length, shape, b -> b.put(data));
  }

  /** A uint8 tensor of `data` (copied), e.g. image bytes. */
  public static Tensor ofUint8(byte[] data, long... shape) {
    return ofArray(DType.UINT8, data.length, shape, b -> b.put(data));
  }

  /**
   * A bool tensor of `data` (copied, one byte per element: 1 for true, 0 for false), e.g. an
   * attention or padding mask.
   */
  public static Tensor of(boolean[] data, long... shape) {
    return ofArray(
        DType.BOOL,
        data.length,
        shape,
        b -> {
          for (boolean v : data) b.put(v ? (byte) 1 : (byte) 0);
        });
  }

  /**
   * A tensor lending native memory of `count` elements shaped `shape`, which `fill` writes (through
   * a duplicate: element 0 stays at the position the Tensor's buffer() promises).
   */
  private static Tensor ofArray(DType dtype, int count, long[] shape, Consumer<ByteBuffer> fill) {
    long[] s = shapeOf(count, shape);
    ByteBuffer b = allocate(dtype, count, s);
    fill.accept(b.duplicate().order(NATIVE));
    return lent(b, dtype, s, null);
  }

  // ---- over a ByteBuffer (zero copy when direct) ---------------------------

  /** A C-contiguous tensor over `buffer` from its position on; see below. */
  public static Tensor fromBuffer(ByteBuffer buffer, DType dtype, long... shape) {
    return fromBuffer(buffer, dtype, shape, null);
  }

  /**
   * A tensor over `buffer`'s bytes from its position on, in native byte order, with `strides` in
   * elements (null: C-contiguous). A writable direct buffer is used in place (zero copy): calls may
   * write it (see the class comment). A read-only buffer ({@link ByteBuffer#isReadOnly()}: a {@code
   * FileChannel.map(READ_ONLY, ...)} mapping, an {@code asReadOnlyBuffer()} view) or a heap buffer
   * is copied once, now: the bytes the layout addresses go into native memory the Tensor owns,
   * which calls may write instead. {@link DType#BOOL} takes one byte per element, which must be 0
   * or 1. Throws IllegalArgumentException if the shape addresses bytes past the buffer's limit.
   */
  public static Tensor fromBuffer(ByteBuffer buffer, DType dtype, long[] shape, long[] strides) {
    if (buffer == null || dtype == null || shape == null) {
      throw new IllegalArgumentException("manypy: buffer, dtype and shape are required");
    }
    shape = shape.clone();
    strides = strides == null ? null : strides.clone();
    if (strides != null && strides.length != shape.length) {
      throw new IllegalArgumentException(
          "manypy: " + strides.length + " strides for " + shape.length + " dimensions");
    }
    for (long d : shape) {
      if (d < 0)
        throw new IllegalArgumentException(
            "manypy: negative size in shape " + Arrays.toString(shape));
    }
    long needed = byteExtent(dtype, shape, strides != null ? strides : contiguousStrides(shape));
    if (needed > buffer.remaining()) {
      throw new IllegalArgumentException(
          "manypy: a "
              + dtype
              + " tensor of shape "
              + Arrays.toString(shape)
              + " needs "
              + needed
              + " bytes but the buffer has "
              + buffer.remaining());
    }
    ByteBuffer view = buffer.slice().order(NATIVE);
    // A model may write what it is lent (a read-only mapping's page would be
    // SIGSEGV): lend only writable memory. A read-only direct buffer is
    // copied by manypy into memory the tensor owns; a heap buffer, which
    // native code cannot address, into a direct buffer here.
    if (view.isDirect() && view.isReadOnly()) {
      return fromNative(newNative(view, dtype, shape, strides, true));
    }
    if (!view.isDirect()) {
      ByteBuffer copy = ByteBuffer.allocateDirect((int) needed).order(NATIVE);
      copy.put(view.limit((int) needed)).clear();
      view = copy;
    }
    return lent(view, dtype, shape, strides);
  }

  /** A Tensor lending `view` (direct, writable, element 0 at index 0) to calls. */
  private static Tensor lent(ByteBuffer view, DType dtype, long[] shape, long[] strides) {
    NativeTensor owner = new NativeTensor(newNative(view, dtype, shape, strides, false));
    return new Tensor(dtype, shape, strides, view, owner);
  }

  /** A new manypy_tensor over (or, with `copy`, copied from) a direct buffer. */
  private static long newNative(
      ByteBuffer view, DType dtype, long[] shape, long[] strides, boolean copy) {
    NativeLibrary.ensureLoaded();
    long[] out = new long[1];
    Status.check(
        ManypyNative.manypy_jni_tensor_new_from_direct_buffer(
            view, dtype.code, dtype.bits, shape, strides, copy ? 1 : 0, out));
    return out[0];
  }

  // ---- from native results --------------------------------------------------

  /** The tensor of a tensor value (zero copy; the value stays the caller's). */
  static Tensor fromValue(long value) {
    long[] out = new long[1];
    Status.check(ManypyNative.manypy_tensor_from_value(value, out));
    return fromNative(out[0]);
  }

  /** A Tensor over the memory of a manypy_tensor, taking over the reference `handle`. */
  private static Tensor fromNative(long handle) {
    NativeTensor owner = new NativeTensor(handle);
    long[] layout = ManypyNative.manypy_jni_tensor_layout(handle);
    DType dtype = DType.of(layout[0], layout[1]);
    if (dtype == null || layout[2] != 1) {
      owner.close();
      throw Status.of(
          ErrorCode.BAD_TENSOR,
          "manypy: a result tensor has DLPack dtype code "
              + layout[0]
              + ", "
              + layout[1]
              + " bits, "
              + layout[2]
              + " lanes, which Java cannot read",
          "",
          "");
    }
    int ndim = (int) layout[3];
    long[] shape = Arrays.copyOfRange(layout, 4, 4 + ndim);
    long[] strides = Arrays.copyOfRange(layout, 4 + ndim, 4 + 2 * ndim);
    return new Tensor(dtype, shape, strides, null, owner);
  }

  /** The memory as a ByteBuffer (see the field); a result's is made on first use. */
  private ByteBuffer data() {
    ByteBuffer d = data;
    if (d != null) return d;
    long bytes = byteExtent(dtype, shape, strides);
    if (bytes == 0) {
      d = ByteBuffer.allocateDirect(0);
    } else {
      long handle = owner.acquire();
      try {
        d = (ByteBuffer) ManypyNative.manypy_jni_tensor_buffer(handle, bytes);
      } finally {
        owner.release();
      }
    }
    data = d.order(NATIVE);
    return data;
  }

  /**
   * A new native value for this tensor (owned by the caller), sharing its manypy_tensor: no copy,
   * no new DLPack wrapper, safe from any number of threads at once.
   */
  long toValue() {
    long handle = owner.acquire();
    try {
      long[] out = new long[1];
      Status.check(ManypyNative.manypy_value_new_tensor_ref(handle, out));
      return out[0];
    } finally {
      owner.release();
    }
  }

  // ---- reading ---------------------------------------------------------------

  public DType dtype() {
    return dtype;
  }

  public long[] shape() {
    return shape.clone();
  }

  /** Strides in elements. */
  public long[] strides() {
    return strides.clone();
  }

  public boolean isContiguous() {
    return contiguous;
  }

  /** Number of elements. */
  public long numel() {
    long n = 1;
    for (long d : shape) n *= d;
    return n;
  }

  /**
   * The tensor's memory (zero copy), native byte order, element 0 at index 0, laid out by {@link
   * #strides()}. Valid while this Tensor is open and reachable.
   */
  public ByteBuffer buffer() {
    checkOpen();
    return data().duplicate().order(NATIVE);
  }

  public float[] toFloatArray() {
    float[] out = new float[elementCount(DType.FLOAT32)];
    contiguousBytes().asFloatBuffer().get(out);
    return out;
  }

  public double[] toDoubleArray() {
    double[] out = new double[elementCount(DType.FLOAT64)];
    contiguousBytes().asDoubleBuffer().get(out);
    return out;
  }

  public long[] toLongArray() {
    long[] out = new long[elementCount(DType.INT64)];
    contiguousBytes().asLongBuffer().get(out);
    return out;
  }

  public int[] toIntArray() {
    int[] out = new int[elementCount(DType.INT32)];
    contiguousBytes().asIntBuffer().get(out);
    return out;
  }

  public short[] toShortArray() {
    short[] out = new short[elementCount(DType.INT16)];
    contiguousBytes().asShortBuffer().get(out);
    return out;
  }

  /** The elements of an int8 or uint8 tensor, or the 0/1 bytes of a bool tensor. */
  public byte[] toByteArray() {
    DType wanted = dtype == DType.UINT8 || dtype == DType.BOOL ? dtype : DType.INT8;
    byte[] out = new byte[elementCount(wanted)];
    contiguousBytes().get(out);
    return out;
  }

  /** The elements of a bool tensor. */
  public boolean[] toBooleanArray() {
    boolean[] out = new boolean[elementCount(DType.BOOL)];
    ByteBuffer bytes = contiguousBytes();
    for (int i = 0; i < out.length; ++i) out[i] = bytes.get(i) != 0;
    return out;
  }

  /**
   * Drops this Tensor's reference to its native tensor (after calls using it return); the memory
   * goes when no call, value or interpreter uses it either. A closed Tensor can no longer be read
   * or passed. Idempotent.
   */
  @Override
  public void close() {
    owner.close();
  }

  @Override
  public String toString() {
    return "Tensor(" + dtype.name().toLowerCase() + ", " + Arrays.toString(shape) + ")";
  }

  // ---- helpers -----------------------------------------------------------------

  private void checkOpen() {
    if (owner.isClosed()) throw new IllegalStateException("manypy: this Tensor is closed");
  }

  private int elementCount(DType wanted) {
    if (dtype != wanted) {
      throw new IllegalStateException("manypy: this tensor is " + dtype + ", not " + wanted);
    }
    long n = numel();
    if (n > Integer.MAX_VALUE - 8)
      throw new IllegalStateException("manypy: too many elements for a Java array: " + n);
    return (int) n;
  }

  /** The elements in C order: the buffer itself when contiguous, else a gathered copy. */
  private ByteBuffer contiguousBytes() {
    checkOpen();
    ByteBuffer src = data().duplicate().order(NATIVE);
    if (contiguous) return src;
    int size = dtype.byteSize();
    int count = (int) numel();
    ByteBuffer out = ByteBuffer.allocate(count * size).order(NATIVE);
    long[] index = new long[shape.length];
    for (int i = 0; i < count; ++i) {
      long offset = 0;
      for (int d = 0; d < shape.length; ++d) offset += index[d] * strides[d];
      for (int b = 0; b < size; ++b) out.put(src.get((int) (offset * size) + b));
      for (int d = shape.length - 1; d >= 0 && ++index[d] == shape[d]; --d) index[d] = 0;
    }
    return out.flip();
  }

  private static ByteBuffer allocate(DType dtype, int count, long[] s) {
    long n = 1;
    for (long d : s) {
      if (d < 0)
        throw new IllegalArgumentException("manypy: negative size in shape " + Arrays.toString(s));
      n *= d;
    }
    if (n != count) {
      throw new IllegalArgumentException(
          "manypy: shape "
              + Arrays.toString(s)
              + " holds "
              + n
              + " elements but the array has "
              + count);
    }
    return ByteBuffer.allocateDirect(count * dtype.byteSize()).order(NATIVE);
  }

  private static long[] shapeOf(int count, long[] shape) {
    return shape == null || shape.length == 0 ? new long[] {count} : shape.clone();
  }

  private static long[] contiguousStrides(long[] shape) {
    long[] strides = new long[shape.length];
    long step = 1;
    for (int d = shape.length - 1; d >= 0; --d) {
      strides[d] = step;
      step *= Math.max(shape[d], 1);
    }
    return strides;
  }

  /** Bytes from element 0 to past the last element; 0 for an empty tensor. */
  private static long byteExtent(DType dtype, long[] shape, long[] strides) {
    long last = 0;
    for (int d = 0; d < shape.length; ++d) {
      if (shape[d] == 0) return 0;
      if (strides[d] < 0) return 0; // manypy rejects negative strides with BadTensorException
      last += (shape[d] - 1) * strides[d];
    }
    return (last + 1) * dtype.byteSize();
  }
}
