package org.manypy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** API usage keys reach a Java handler once per process, from every source. */
class ApiUsageTest {
  @AfterEach
  void removeHandler() {
    Manypy.setApiUsageHandler(null);
    Manypy.setCallbackErrorHandler(null);
  }

  static long count(Queue<String> keys, String key) {
    return keys.stream().filter(key::equals).count();
  }

  @Test
  void eachKeyOnceFromEverySource() {
    Queue<String> keys = new ConcurrentLinkedQueue<>();
    try (Pool pool = Pool.create(1)) {
      // Installed after the pool started: the keys already seen are replayed.
      Manypy.setApiUsageHandler(keys::add);
      assertEquals(1, count(keys, "manypy.pool.create"));
      assertEquals(1, count(keys, "torch.python.import"));
      Manypy.logApiUsage("java.test.caller_key");
      Manypy.logApiUsage("java.test.caller_key");
      pool.exec(0, "import torch\ntorch._C._log_api_usage_once('java.test.model_key')");
      pool.exec(0, "torch._C._log_api_usage_once('java.test.model_key')");
      ScriptModule.load(TestSupport.archive("python_heavy_script.pt")).close();
      ScriptModule.load(TestSupport.archive("python_heavy_script.pt")).close();
    }
    assertEquals(1, count(keys, "java.test.caller_key"));
    assertEquals(1, count(keys, "java.test.model_key"));
    assertEquals(1, count(keys, "manypy.script.load"));
    assertEquals(keys.size(), keys.stream().distinct().count(), "a key came twice: " + keys);
  }

  @Test
  void aThrowingHandlerIsReportedNotFatal() {
    Queue<Throwable> reported = new ConcurrentLinkedQueue<>();
    Manypy.setCallbackErrorHandler(reported::add);
    Manypy.setApiUsageHandler(
        key -> {
          throw new IllegalArgumentException("handler broke on " + key);
        });
    Manypy.logApiUsage("java.test.throwing_handler_key");
    assertFalse(reported.isEmpty());
    assertTrue(
        reported.stream().anyMatch(e -> e.getMessage().contains("java.test.throwing_handler_key")));
  }

  @Test
  void removedHandlerHearsNothing() {
    Queue<String> keys = new ConcurrentLinkedQueue<>();
    Manypy.setApiUsageHandler(keys::add);
    Manypy.setApiUsageHandler(null);
    keys.clear();
    Manypy.logApiUsage("java.test.after_removal");
    assertEquals(List.of(), List.copyOf(keys));
  }
}
