// Helpers shared by the core tests.
#pragma once

#include <cstddef>
#include <string>

#include "pool.h"

namespace manypy::test {

PoolOptions options(size_t interpreters, ThreadMode mode = ThreadMode::kDirect);

// Evaluates `expression` and returns it as int64 / string, failing the test
// (by throwing) if the value has another kind.
int64_t eval_int(Pool& pool, int interpreter, const std::string& expression);
std::string eval_str(Pool& pool, int interpreter, const std::string& expression);

// Private memory of this process (Private_Clean + Private_Dirty of
// /proc/self/smaps_rollup), in bytes.
size_t private_bytes();

}  // namespace manypy::test
