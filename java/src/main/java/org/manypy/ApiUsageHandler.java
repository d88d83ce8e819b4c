package org.manypy;

/**
 * Receives each distinct API usage key once per process (torch's, such as "torch.python.import",
 * manypy's, such as "manypy.pool.create", the caller's and model code's). May run on any thread
 * while the library holds a lock: it must return quickly and must not call manypy.
 */
@FunctionalInterface
public interface ApiUsageHandler {
  void onApiUsage(String key);
}
