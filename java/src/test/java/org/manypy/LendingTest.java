package org.manypy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Who may write a lent buffer (docs/java.md): hostile.pt's scale_in_place(x) doubles its argument
 * in place (x.mul_(2)). A read-only buffer reaches Python only as a copy; a writable direct buffer
 * is lent, and the model's writes show in it. A result is Java's alone, even when the model keeps
 * the tensor it returned and changes it later.
 */
class LendingTest extends IdentityModelTest {
  static ReplicatedObject hostile; // in IdentityModelTest's pool

  @BeforeAll
  static void loadHostile() {
    hostile = TestSupport.loadModel(pool, "hostile.pt");
  }

  @AfterAll
  static void closeHostile() {
    hostile.close();
  }

  private static void scaleInPlace(Tensor x) {
    assertNull(hostile.callMethod("scale_in_place", x));
  }

  private static byte[] floatBytes(float... values) {
    ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.nativeOrder());
    b.asFloatBuffer().put(values);
    return b.array();
  }

  private static float[] floats(ByteBuffer b, int n) {
    float[] out = new float[n];
    b.duplicate().order(ByteOrder.nativeOrder()).asFloatBuffer().get(out);
    return out;
  }

  @Test
  void aReadOnlyMappedFileIsCopiedAndStaysUnchanged(@TempDir Path dir) throws IOException {
    Path file = dir.resolve("input.bin");
    byte[] bytes = floatBytes(1, 2, 3, 4);
    Files.write(file, bytes);
    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
      MappedByteBuffer mapped = channel.map(FileChannel.MapMode.READ_ONLY, 0, bytes.length);
      assertTrue(mapped.isDirect() && mapped.isReadOnly());
      Tensor x = Tensor.fromBuffer(mapped, DType.FLOAT32, 4);
      // Lent uncopied, this write was SIGSEGV in the JVM.
      scaleInPlace(x);
      assertArrayEquals(new float[] {1, 2, 3, 4}, floats(mapped, 4));
      assertArrayEquals(bytes, Files.readAllBytes(file));
      // The model wrote the Tensor's own copy.
      assertArrayEquals(new float[] {2, 4, 6, 8}, x.toFloatArray());
    }
  }

  @Test
  void aReadOnlyViewOfAWritableBufferIsCopied() {
    ByteBuffer memory = ByteBuffer.allocateDirect(12).order(ByteOrder.nativeOrder());
    memory.asFloatBuffer().put(new float[] {1, 2, 3});
    Tensor x = Tensor.fromBuffer(memory.asReadOnlyBuffer(), DType.FLOAT32, 3);
    scaleInPlace(x);
    assertArrayEquals(new float[] {1, 2, 3}, floats(memory, 3), "written through a read-only view");
    assertArrayEquals(new float[] {2, 4, 6}, x.toFloatArray());
  }

  @Test
  void aWritableDirectBufferIsLentAndWrittenThrough() {
    // Documented: Python reads and writes a writable direct buffer in place.
    ByteBuffer memory = ByteBuffer.allocateDirect(12).order(ByteOrder.nativeOrder());
    memory.asFloatBuffer().put(new float[] {1, 2, 3});
    Tensor x = Tensor.fromBuffer(memory, DType.FLOAT32, 3);
    scaleInPlace(x);
    assertArrayEquals(new float[] {2, 4, 6}, floats(memory, 3));
    scaleInPlace(x);
    assertArrayEquals(new float[] {4, 8, 12}, floats(memory, 3));
  }

  @Test
  void aPrivateMappingIsLentAndTheFileStaysUnchanged(@TempDir Path dir) throws IOException {
    // MapMode.PRIVATE is writable copy-on-write memory: lent without a copy,
    // and the model's writes stay in this process.
    Path file = dir.resolve("input.bin");
    byte[] bytes = floatBytes(1, 2);
    Files.write(file, bytes);
    try (FileChannel channel =
        FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      MappedByteBuffer mapped = channel.map(FileChannel.MapMode.PRIVATE, 0, bytes.length);
      scaleInPlace(Tensor.fromBuffer(mapped, DType.FLOAT32, 2));
      assertArrayEquals(new float[] {2, 4}, floats(mapped, 2));
      assertArrayEquals(bytes, Files.readAllBytes(file));
    }
  }

  /**
   * hostile.pt's keep(n) returns arange(n) and keeps it, keep_and_return_a_view(n) returns a view
   * of one it keeps, and change_kept(how) then changes what it kept: in place, or by giving it new
   * storage. The results' memory never changes (the pool has one interpreter, whose list of kept
   * tensors it is).
   */
  @Test
  void aResultTheModelKeepsNeverChanges() {
    for (String how : List.of("fill", "resize", "set", "out")) {
      try (Tensor kept = (Tensor) hostile.callMethod("keep", 4L);
          Tensor keptView = (Tensor) hostile.callMethod("keep_and_return_a_view", 4L)) {
        ByteBuffer memory = kept.buffer();
        ByteBuffer part = keptView.buffer();
        assertNull(hostile.callMethod("change_kept", how));
        assertArrayEquals(new float[] {0, 1, 2, 3}, floats(memory, 4), how);
        assertArrayEquals(new float[] {1, 2, 3}, floats(part, 3), how);
      }
    }
  }
}
