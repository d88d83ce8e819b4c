package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Bool tensors both ways: the padding mask of a 2-layer nn.TransformerEncoder (encoder.pt) from a
 * boolean[] and from a direct ByteBuffer, checked against eager Python's output, and bool results.
 */
class BoolTensorTest extends IdentityModelTest {
  static final long[] SRC_SHAPE = {3, 7, 32};
  static final long[] MASK_SHAPE = {3, 7};

  static TorchPackage encoderPackage;
  static ReplicatedObject encoder;
  static float[] src;
  static byte[] maskBytes; // one byte per element, 1 = padding
  static boolean[] mask;
  static float[] expected;

  @BeforeAll
  static void loadEncoder() throws IOException {
    encoderPackage = pool.loadPackage(TestSupport.archive("encoder.pt"));
    encoder = encoderPackage.loadPickle("model", "model.pkl");
    src = TestSupport.floats("encoder.src.bin");
    expected = TestSupport.floats("encoder.expected.out.bin");
    maskBytes = Files.readAllBytes(TestSupport.archive("encoder.mask.bin"));
    assertEquals(3 * 7, maskBytes.length);
    mask = new boolean[maskBytes.length];
    for (int i = 0; i < mask.length; ++i) mask[i] = maskBytes[i] != 0;
  }

  @AfterAll
  static void closeEncoder() {
    encoder.close();
    encoderPackage.close();
  }

  /** The encoder's output, checked against eager Python's. */
  static void assertEncoderOutput(Tensor out) {
    assertEquals(DType.FLOAT32, out.dtype());
    assertArrayEquals(SRC_SHAPE, out.shape());
    float[] got = out.toFloatArray();
    // allclose(got, expected, rtol=1e-5, atol=1e-5): the same torch ran the
    // same operators; only summation order may differ.
    for (int i = 0; i < got.length; ++i) {
      float tolerance = 1e-5f + 1e-5f * Math.abs(expected[i]);
      assertTrue(
          Math.abs(got[i] - expected[i]) <= tolerance,
          "element " + i + ": " + got[i] + " vs eager Python's " + expected[i]);
    }
  }

  @Test
  void encoderWithABooleanArrayMaskMatchesEagerPython() {
    Tensor maskTensor = Tensor.of(mask, MASK_SHAPE);
    assertEquals(DType.BOOL, maskTensor.dtype());
    // The model raises TypeError unless the mask arrives as torch.bool.
    try (Tensor out = (Tensor) encoder.call(Tensor.of(src, SRC_SHAPE), maskTensor)) {
      assertEncoderOutput(out);
    }
  }

  @Test
  void encoderWithAZeroCopyByteBufferMask() {
    ByteBuffer memory = ByteBuffer.allocateDirect(maskBytes.length);
    memory.put(maskBytes).clear();
    Tensor maskTensor = Tensor.fromBuffer(memory, DType.BOOL, MASK_SHAPE);
    try (Tensor out = (Tensor) encoder.call(Tensor.of(src, SRC_SHAPE), maskTensor)) {
      assertEncoderOutput(out);
    }
    // Zero copy: identity returns the very tensor it got, over the Java
    // buffer's memory, so a write to one shows in the other.
    try (Tensor same = (Tensor) identity.call(maskTensor)) {
      assertEquals(DType.BOOL, same.dtype());
      int position = 1;
      boolean before = same.toBooleanArray()[position];
      memory.put(position, before ? (byte) 0 : (byte) 1);
      assertEquals(!before, same.toBooleanArray()[position]);
      memory.put(position, maskBytes[position]);
    }
  }

  @Test
  void boolResultsComeBackAsBool() {
    try (Tensor inverted = (Tensor) encoder.callMethod("invert", Tensor.of(mask, MASK_SHAPE))) {
      assertEquals(DType.BOOL, inverted.dtype());
      assertArrayEquals(MASK_SHAPE, inverted.shape());
      boolean[] got = inverted.toBooleanArray();
      assertEquals(mask.length, got.length);
      for (int i = 0; i < mask.length; ++i) assertEquals(!mask[i], got[i], "element " + i);
      byte[] bytes = inverted.toByteArray();
      for (int i = 0; i < mask.length; ++i) assertEquals(mask[i] ? 0 : 1, bytes[i], "byte " + i);
      assertEquals(1, inverted.buffer().capacity() / mask.length);
      // A bool result passed back in stays bool: inverting twice gives the mask.
      try (Tensor twice = (Tensor) encoder.callMethod("invert", inverted)) {
        assertArrayEquals(mask, twice.toBooleanArray());
      }
    }
    // Python-made bool tensors, strided ones included.
    try (Tensor t =
        (Tensor)
            pool.eval(
                "__import__('torch').tensor([[True, False, True], [False, False, True]]).t()")) {
      assertEquals(DType.BOOL, t.dtype());
      assertArrayEquals(new long[] {3, 2}, t.shape());
      assertEquals(false, t.isContiguous());
      assertArrayEquals(new boolean[] {true, false, false, false, true, true}, t.toBooleanArray());
    }
  }

  @Test
  void operatorCallbacksSeeBoolInputs() {
    Queue<OpInput> inputs = new ConcurrentLinkedQueue<>();
    try (CallOptions context = new CallOptions().context("bool-mask", "r1");
        OpCallbackRegistration r =
            Manypy.addOpCallbacks(
                e -> {
                  if (e.modelId().equals("bool-mask")) inputs.addAll(e.inputs());
                },
                null,
                1.0,
                true);
        Tensor out =
            (Tensor) encoder.call("invert", List.of(Tensor.of(mask, MASK_SHAPE)), null, context)) {
      assertEquals(DType.BOOL, out.dtype());
    }
    assertTrue(
        inputs.stream()
            .anyMatch(
                i ->
                    i.kind() == OpInput.Kind.TENSOR
                        && i.dtype() == DType.BOOL
                        && Arrays.equals(i.shape(), MASK_SHAPE)),
        inputs.toString());
  }

  @Test
  void javaMadeBoolTensors() {
    Tensor t = Tensor.of(new boolean[] {true, false, true, true}, 2, 2);
    assertEquals(DType.BOOL, t.dtype());
    assertEquals(1, DType.BOOL.byteSize());
    assertArrayEquals(new boolean[] {true, false, true, true}, t.toBooleanArray());
    assertArrayEquals(new byte[] {1, 0, 1, 1}, t.toByteArray());
    assertEquals(1, t.buffer().get(0));
    assertThrows(IllegalStateException.class, t::toFloatArray);
    try (Tensor back = (Tensor) identity.call(t)) {
      assertArrayEquals(new boolean[] {true, false, true, true}, back.toBooleanArray());
    }
    // A heap buffer is copied once.
    ByteBuffer heap = ByteBuffer.wrap(new byte[] {0, 1, 1});
    try (Tensor back = (Tensor) identity.call(Tensor.fromBuffer(heap, DType.BOOL, 3))) {
      assertArrayEquals(new boolean[] {false, true, true}, back.toBooleanArray());
    }
    IllegalArgumentException shape =
        assertThrows(IllegalArgumentException.class, () -> Tensor.of(new boolean[5], 2, 3));
    assertTrue(
        shape.getMessage().contains("holds 6 elements but the array has 5"), shape.getMessage());
    try (Tensor empty = (Tensor) identity.call(Tensor.of(new boolean[0], 0, 4))) {
      assertEquals(DType.BOOL, empty.dtype());
      assertEquals(0, empty.toBooleanArray().length);
    }
  }
}
