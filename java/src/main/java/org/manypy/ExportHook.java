package org.manypy;

import java.util.Map;

/**
 * Returns extra files (name to byte[] or String) to stamp on every archive written in the process:
 * by {@link ScriptModule#save}, {@link TorchPackage#save}, and torch.jit.save or torch.package's
 * PackageExporter in any interpreter. They are stored as "extra/&lt;name&gt;". Runs on the writing
 * thread under a lock; must not call manypy. Null or empty: none.
 */
@FunctionalInterface
public interface ExportHook {
  Map<String, ?> extraFiles();
}
