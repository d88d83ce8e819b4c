// Interpreters of one process share nothing at the Python level, and each
// has its own working torch.
#include <gtest/gtest.h>
#include <signal.h>

#include "test_support.h"

namespace manypy {
namespace {

using test::eval_int;
using test::eval_str;
using test::options;

TEST(Isolation, GlobalsAndModulesAreSeparate) {
  Pool pool(options(2));
  pool.exec(0, "secret = 41\nimport sys\nsys.manypy_marker = 'zero'");
  EXPECT_EQ(eval_int(pool, 0, "secret + 1"), 42);
  try {
    pool.eval(1, "secret");
    FAIL() << "interpreter 1 saw interpreter 0's global";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kPython);
    EXPECT_EQ(e.python_type(), "NameError");
  }
  EXPECT_EQ(eval_str(pool, 0, "__import__('sys').manypy_marker"), "zero");
  EXPECT_EQ(eval_int(pool, 1, "int(hasattr(__import__('sys'), 'manypy_marker'))"), 0);
}

TEST(Isolation, EachInterpreterHasItsOwnTorch) {
  Pool pool(options(2));
  pool.exec_all("import torch\nx = torch.arange(6.0).reshape(2, 3)\n");
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(eval_int(pool, i, "int((x @ x.T).sum().item())"), 5 + 14 + 14 + 50);
    // The same process, different copies of torch's C extension.
    EXPECT_EQ(eval_int(pool, i, "__import__('os').getpid()"), getpid());
  }
  pool.exec(0, "torch.manual_seed(1)\nimport torch.nn.functional as F\n");
  EXPECT_EQ(eval_int(pool, 0, "int(torch.get_num_threads())"), 1);
  int64_t a = eval_int(pool, 0, "id(torch._C)");
  int64_t b = eval_int(pool, 1, "id(torch._C)");
  EXPECT_NE(a, b);
}

TEST(Isolation, SignalHandlersStayWithTheHost) {
  Pool pool(options(2));
  pool.exec_all("import signal");
  // No interpreter installed a handler of its own for SIGINT (importing
  // Python's signal module would, in a process with the default one)...
  struct sigaction now;
  ASSERT_EQ(sigaction(SIGINT, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  // ...and each interpreter's own view agrees with the process.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(eval_int(pool, i, "int(signal.getsignal(signal.SIGINT) == signal.SIG_DFL)"), 1);
  }
}

}  // namespace
}  // namespace manypy
