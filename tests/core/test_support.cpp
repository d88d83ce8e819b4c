#include "test_support.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace manypy::test {

PoolOptions options(size_t interpreters, ThreadMode mode) {
  PoolOptions o;
  o.interpreters = interpreters;
  o.thread_mode = mode;
  return o;
}

int64_t eval_int(Pool& pool, int interpreter, const std::string& expression) {
  Value v = pool.eval(interpreter, expression);
  if (v.kind != ValueKind::kInt64) throw std::runtime_error(expression + " is not an int");
  return v.i;
}

std::string eval_str(Pool& pool, int interpreter, const std::string& expression) {
  Value v = pool.eval(interpreter, expression);
  if (v.kind != ValueKind::kString) throw std::runtime_error(expression + " is not a str");
  return v.s;
}

size_t private_bytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  size_t kb = 0;
  while (std::getline(in, line)) {
    if (line.rfind("Private_Clean:", 0) == 0 || line.rfind("Private_Dirty:", 0) == 0) {
      std::istringstream fields(line.substr(line.find(':') + 1));
      size_t value = 0;
      fields >> value;
      kb += value;
    }
  }
  return kb * 1024;
}

}  // namespace manypy::test
