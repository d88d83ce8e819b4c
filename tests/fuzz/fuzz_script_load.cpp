// Fuzz target: any bytes as a TorchScript archive, loaded with libtorch on
// the host through manypy_script_load_bytes (no Python, no interpreter).
// Loading reads the zip, unpickles constants.pkl and data.pkl and compiles
// the archive's code/ records with TorchScript's frontend. A module that
// loads is freed again; no method is called.
#include "fuzz_support.h"
#include "zip_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The API takes no NULL data, even for 0 bytes.
  static const uint8_t empty = 0;
  manypy_script_module* module = nullptr;
  manypy_code code = fuzz::take(manypy_script_load_bytes(size ? data : &empty, size, &module),
                                "manypy_script_load_bytes");
  if (code == MANYPY_OK) {
    FUZZ_CHECK(module != nullptr, "no module");
    manypy_script_free(module);
    return 0;
  }
  FUZZ_CHECK(module == nullptr, "a failed call wrote its out-parameter");
  FUZZ_CHECK(code == MANYPY_ERR_BAD_ARCHIVE || code == MANYPY_ERR_UNSUPPORTED_VERSION ||
                 code == MANYPY_ERR_NOT_A_PACKAGE || code == MANYPY_ERR_RESOURCE_EXHAUSTED,
             manypy_code_name(code));
  return 0;
}

MANYPY_FUZZ_ZIP_MUTATOR
