// Pools lease interpreters from the process and give them back clean; bad
// input gets a precise error and the interpreter keeps serving.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "isolation/namespace.h"
#include "runtime.h"
#include "test_support.h"

namespace manypy {
namespace {

using test::eval_int;
using test::eval_str;
using test::options;

template <typename Fn>
Error error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(Code::kInternal, "no error");
}

TEST(Lease, GivesInterpretersBackClean) {
  char dir_template[] = "/tmp/manypy-lease-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  std::string dir = dir_template;
  std::ofstream(dir + "/lease_probe_mod.py") << "VALUE = 7\n";

  PoolOptions with_path = options(1);
  with_path.lease.extra_sys_path.push_back(dir);
  with_path.lease.intra_op_threads = 2;
  {
    Pool pool(with_path);
    EXPECT_EQ(eval_int(pool, 0, "__import__('lease_probe_mod').VALUE"), 7);
    EXPECT_EQ(eval_int(pool, 0, "__import__('torch').get_num_threads()"), 2);
    pool.exec(0, "left_behind = 1");
  }
  Pool pool(options(1));
  EXPECT_EQ(eval_int(pool, 0, "int(" + std::string("'") + dir + "' in __import__('sys').path)"), 0);
  EXPECT_EQ(eval_int(pool, 0, "int('lease_probe_mod' in __import__('sys').modules)"), 0);
  EXPECT_EQ(eval_int(pool, 0, "__import__('torch').get_num_threads()"), 1);
  EXPECT_EQ(error_of([&] { pool.eval(0, "left_behind"); }).python_type(), "NameError");
  // torch stays imported: giving back does not cost a re-import.
  EXPECT_EQ(eval_int(pool, 0, "int('torch' in __import__('sys').modules)"), 1);
  std::filesystem::remove_all(dir);
}

// What model code changes for the whole interpreter (or its thread) is put
// back before the next pool; tests/capi/capi_lease_state.c has one test per
// setting, this one the mechanism, in the core.
TEST(Lease, SettingsComeBackAsTheFirstLeaseFoundThem) {
  for (ThreadMode mode : {ThreadMode::kDirect, ThreadMode::kHandoff}) {
    const std::string read =
        "repr((__import__('gc').isenabled(), __import__('sys').getrecursionlimit(), "
        "str(__import__('torch').zeros(1).dtype), __import__('torch').is_grad_enabled()))";
    std::string before;
    {
      Pool pool(options(1, mode));
      before = eval_str(pool, 0, read);
      pool.exec(0,
                "import gc, sys, torch\n"
                "gc.disable()\n"
                "sys.setrecursionlimit(4321)\n"
                "torch.set_default_dtype(torch.float64)\n"
                "torch.set_grad_enabled(False)\n");
      EXPECT_NE(eval_str(pool, 0, read), before);
    }
    Pool pool(options(1, mode));
    EXPECT_EQ(eval_str(pool, 0, read), before);
  }
}

// A setting that cannot be put back (the interpreter's own sys.stdout,
// closed) retires the interpreter, with the reason, instead of handing it
// to the next pool.
TEST(Lease, ASettingThatCannotBePutBackRetiresTheInterpreter) {
  Interpreter* used = nullptr;
  {
    Pool pool(options(1));
    used = pool.interpreters().at(0);
    pool.exec(0, "import sys\nsys.stdout.close()\n");
  }
  ASSERT_NE(used, nullptr);
  EXPECT_TRUE(used->broken());
  const std::string why = used->why_not_serving();
  EXPECT_NE(why.find("its lease could not end cleanly"), std::string::npos) << why;
  EXPECT_NE(why.find("sys.stdout"), std::string::npos) << why;
  Pool pool(options(1));
  EXPECT_NE(pool.interpreters().at(0), used);
  EXPECT_EQ(eval_int(pool, 0, "int(__import__('sys').stdout.closed)"), 0);
}

TEST(Lease, TwoHundredPoolsInOneProcess) {
  for (int k = 0; k < 200; ++k) {
    Pool pool(options(1 + k % 2));
    ASSERT_EQ(eval_int(pool, Pool::kAnyInterpreter, std::to_string(k) + " + 1"), k + 1);
  }
}

TEST(Lease, PoolSizeIsChecked) {
  size_t limit = Runtime::get().interpreters().capacity();
  // glibc's namespaces, on every torch (pthread keys no longer limit it).
  EXPECT_EQ(limit, isolation::Namespace::kMaxNamespaces);
  Error zero = error_of([] { Pool pool(options(0)); });
  EXPECT_EQ(zero.code(), Code::kOutOfRange);
  EXPECT_NE(zero.message().find("1 to " + std::to_string(limit)), std::string::npos)
      << zero.message();
  EXPECT_EQ(error_of([&] { Pool pool(options(limit + 1)); }).code(), Code::kOutOfRange);
}

TEST(Lease, BadInputGetsPreciseErrorsAndTheInterpreterKeepsServing) {
  Pool pool(options(2));
  Error index = error_of([&] { pool.eval(2, "1"); });
  EXPECT_EQ(index.code(), Code::kOutOfRange);
  EXPECT_NE(index.message().find("out of range"), std::string::npos);
  EXPECT_EQ(error_of([&] { pool.eval(-7, "1"); }).code(), Code::kOutOfRange);

  Error syntax = error_of([&] { pool.exec(1, "def f(:\n  pass"); });
  EXPECT_EQ(syntax.code(), Code::kSyntax);
  EXPECT_EQ(syntax.python_type(), "SyntaxError");
  EXPECT_EQ(syntax.message().rfind("interpreter 1: SyntaxError", 0), 0u) << syntax.message();

  pool.exec(1,
            "def inner():\n    raise ValueError('bad model input')\ndef outer():\n    inner()\n");
  Error raised = error_of([&] { pool.exec(1, "outer()"); });
  EXPECT_EQ(raised.code(), Code::kPython);
  EXPECT_EQ(raised.python_type(), "ValueError");
  EXPECT_EQ(raised.message(), "interpreter 1: ValueError: bad model input");
  EXPECT_NE(raised.traceback().find("in outer"), std::string::npos) << raised.traceback();
  EXPECT_NE(raised.traceback().find("in inner"), std::string::npos) << raised.traceback();

  Error unsupported = error_of([&] { pool.eval(1, "[1, {2}]"); });
  EXPECT_EQ(unsupported.code(), Code::kUnsupportedType);
  EXPECT_NE(unsupported.message().find("'set'"), std::string::npos) << unsupported.message();
  EXPECT_EQ(error_of([&] { pool.eval(1, "2**70"); }).code(), Code::kOutOfRange);

  EXPECT_EQ(eval_int(pool, 1, "1 + 1"), 2);
  EXPECT_EQ(eval_str(pool, 1, "'still ' + 'serving'"), "still serving");
}

TEST(Lease, IntraOpThreadsMustBePositive) {
  PoolOptions o = options(1);
  o.lease.intra_op_threads = 0;
  EXPECT_EQ(error_of([&] { Pool pool(o); }).code(), Code::kInvalidArgument);
}

// Starting an interpreter takes about a second; other pools are created
// from idle interpreters and given back meanwhile, in parallel starts and
// in one-at-a-time starts alike (ctest runs this binary both ways).
TEST(Lease, AStartDoesNotStallOtherPools) {
  using Clock = std::chrono::steady_clock;
  InterpreterSet& set = Runtime::get().interpreters();
  auto first = std::make_unique<Pool>(options(1));
  const size_t before = set.size();
  std::atomic<bool> created{false};
  Clock::duration create_time{};
  // `first` holds one interpreter, so a pool of `before` must start one.
  std::thread starter([&] {
    auto t0 = Clock::now();
    Pool big(options(before));
    create_time = Clock::now() - t0;
    created = true;
  });
  while (set.size() == before) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto t0 = Clock::now();
  first.reset();  // gives its interpreter back: takes the set's lock
  Clock::duration give_back_time = Clock::now() - t0;
  starter.join();
  ASSERT_TRUE(created);
  // A ratio within one run, not a time limit: giving back takes
  // milliseconds, a start about a second; waiting for it would take most of it.
  EXPECT_LT(give_back_time * 4, create_time)
      << "giving a pool back took " << std::chrono::duration<double>(give_back_time).count()
      << " s while another pool's start took " << std::chrono::duration<double>(create_time).count()
      << " s";
}

}  // namespace
}  // namespace manypy
