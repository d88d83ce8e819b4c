package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/** Tensors in and out: Java arrays, direct buffers (zero copy), strides, dtypes, errors. */
class TensorTest extends IdentityModelTest {
  @Test
  void everyArrayTypeRoundTrips() {
    try (Tensor f = (Tensor) identity.call(Tensor.of(new float[] {1.5f, -2, 3, 4, 5, 6}, 2, 3))) {
      assertEquals(DType.FLOAT32, f.dtype());
      assertArrayEquals(new long[] {2, 3}, f.shape());
      assertArrayEquals(new float[] {1.5f, -2, 3, 4, 5, 6}, f.toFloatArray());
    }
    try (Tensor d = (Tensor) identity.call(Tensor.of(new double[] {Math.PI, -1e300}))) {
      assertArrayEquals(new double[] {Math.PI, -1e300}, d.toDoubleArray());
    }
    try (Tensor l = (Tensor) identity.call(Tensor.of(new long[] {Long.MIN_VALUE, 7}))) {
      assertArrayEquals(new long[] {Long.MIN_VALUE, 7}, l.toLongArray());
    }
    try (Tensor i = (Tensor) identity.call(Tensor.of(new int[] {-5, 9, 11}, 3, 1))) {
      assertArrayEquals(new int[] {-5, 9, 11}, i.toIntArray());
      assertArrayEquals(new long[] {3, 1}, i.shape());
    }
    try (Tensor s = (Tensor) identity.call(Tensor.of(new short[] {-300, 300}))) {
      assertArrayEquals(new short[] {-300, 300}, s.toShortArray());
    }
    try (Tensor b = (Tensor) identity.call(Tensor.of(new byte[] {-128, 127}))) {
      assertEquals(DType.INT8, b.dtype());
      assertArrayEquals(new byte[] {-128, 127}, b.toByteArray());
    }
    try (Tensor u = (Tensor) identity.call(Tensor.ofUint8(new byte[] {(byte) 255, 1}))) {
      assertEquals(DType.UINT8, u.dtype());
      assertArrayEquals(new byte[] {(byte) 255, 1}, u.toByteArray());
    }
  }

  @Test
  void javaMadeTensorsReadBackWithoutACall() {
    assertArrayEquals(new byte[] {-1, 2}, Tensor.of(new byte[] {-1, 2}).toByteArray());
    assertArrayEquals(
        new byte[] {(byte) 200, 3}, Tensor.ofUint8(new byte[] {(byte) 200, 3}).toByteArray());
    assertEquals(2, Tensor.of(new byte[] {1, 2}).buffer().get(1));
    assertArrayEquals(new float[] {1, 2}, Tensor.of(new float[] {1, 2}).toFloatArray());
  }

  @Test
  void directBuffersAreSharedBothWays() {
    ByteBuffer memory = ByteBuffer.allocateDirect(4 * 4).order(ByteOrder.nativeOrder());
    memory.asFloatBuffer().put(new float[] {1, 2, 3, 4});
    Tensor in = Tensor.fromBuffer(memory, DType.FLOAT32, 2, 2);
    try (Tensor out = (Tensor) identity.call(in)) {
      // Identity returns the very tensor it got: the result's memory is the
      // Java buffer, so a write to one shows in the other.
      memory.putFloat(0, 42f);
      assertEquals(42f, out.toFloatArray()[0]);
      out.buffer().putFloat(4, -7f);
      assertEquals(-7f, memory.getFloat(4));
    }
  }

  @Test
  void stridedAndOffsetBuffers() {
    // A 2x3 view with strides (1, 2): the transpose of a 3x2 C-ordered array.
    ByteBuffer memory = ByteBuffer.allocateDirect(8 + 6 * 4).order(ByteOrder.nativeOrder());
    memory.position(8);
    memory
        .slice()
        .order(ByteOrder.nativeOrder())
        .asFloatBuffer()
        .put(new float[] {1, 2, 3, 4, 5, 6});
    Tensor t = Tensor.fromBuffer(memory, DType.FLOAT32, new long[] {2, 3}, new long[] {1, 2});
    assertEquals(false, t.isContiguous());
    assertArrayEquals(new float[] {1, 3, 5, 2, 4, 6}, t.toFloatArray());
    try (Tensor out = (Tensor) identity.call(t)) {
      assertArrayEquals(new long[] {1, 2}, out.strides());
      assertArrayEquals(new float[] {1, 3, 5, 2, 4, 6}, out.toFloatArray());
    }
    // A heap buffer is copied once, with its layout.
    ByteBuffer heap = ByteBuffer.allocate(8).order(ByteOrder.nativeOrder());
    heap.putFloat(0, 5f).putFloat(4, 6f);
    try (Tensor out = (Tensor) identity.call(Tensor.fromBuffer(heap, DType.FLOAT32, 2))) {
      assertArrayEquals(new float[] {5, 6}, out.toFloatArray());
    }
  }

  @Test
  void emptyTensorsAndResultsPassedOn() {
    try (Tensor empty = (Tensor) identity.call(Tensor.of(new float[0], 0, 3))) {
      assertEquals(0, empty.numel());
      assertArrayEquals(new long[] {0, 3}, empty.shape());
      assertEquals(0, empty.toFloatArray().length);
    }
    // A result passed back in shares its native memory; closing the Java
    // Tensor early does not free memory a call still uses.
    Tensor first = (Tensor) identity.call(Tensor.of(new float[] {1, 2}));
    try (Tensor second = (Tensor) identity.call(first)) {
      first.close();
      assertArrayEquals(new float[] {1, 2}, second.toFloatArray());
    }
  }

  @Test
  void badTensorsAreClearErrors() {
    IllegalArgumentException shape =
        assertThrows(IllegalArgumentException.class, () -> Tensor.of(new float[5], 2, 3));
    assertTrue(
        shape.getMessage().contains("holds 6 elements but the array has 5"), shape.getMessage());
    ByteBuffer small = ByteBuffer.allocateDirect(8);
    IllegalArgumentException size =
        assertThrows(
            IllegalArgumentException.class, () -> Tensor.fromBuffer(small, DType.FLOAT32, 3));
    assertTrue(
        size.getMessage().contains("needs 12 bytes but the buffer has 8"), size.getMessage());
    // A negative stride passes Java's checks and is refused by manypy when
    // the Tensor is made.
    BadTensorException bad =
        assertThrows(
            BadTensorException.class,
            () ->
                Tensor.fromBuffer(
                    ByteBuffer.allocateDirect(16), DType.FLOAT32, new long[] {2}, new long[] {-1}));
    assertEquals(ErrorCode.BAD_TENSOR, bad.code());
    // A closed input Tensor can no longer be passed or read.
    Tensor input = Tensor.of(new float[] {1, 2});
    input.close();
    assertThrows(IllegalStateException.class, () -> identity.call(input));
    assertThrows(IllegalStateException.class, input::toFloatArray);
    // The wrong reader, and a closed result.
    Tensor result = (Tensor) identity.call(Tensor.of(new float[] {1}));
    assertThrows(IllegalStateException.class, result::toLongArray);
    result.close();
    result.close(); // idempotent
    assertThrows(IllegalStateException.class, result::buffer);
    assertThrows(IllegalStateException.class, () -> identity.call(result));
  }
}
