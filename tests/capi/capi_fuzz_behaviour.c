/*
 * A fuzzer of model behaviour (docs/hardening.md, "The behaviour fuzzer"):
 * random sequences of what hostile models do (samples/models/hostile.py),
 * several calls at a time, synchronous and asynchronous, pinned and not, with
 * random deadlines and cancels, on a pool of 2 interpreters that may grow to
 * 3, in DIRECT and in HANDOFF mode.
 *
 * Every call must end, and end precisely:
 *  - a result, which must be the behaviour's (an exact value);
 *  - MANYPY_ERR_DEADLINE_EXCEEDED only for a call that had a deadline, and
 *    not before it; MANYPY_ERR_CANCELLED only for a call whose token was
 *    cancelled;
 *  - MANYPY_ERR_PYTHON only for a behaviour that raises, with its
 *    exception's type;
 *  - MANYPY_ERR_INTERPRETER_BROKEN only where it means what docs/c-api.md
 *    says: the pinned interpreter is out of service, or, for an unpinned
 *    call, none of the pool's interpreters serves;
 *  - nothing else (MANYPY_ERR_INTERNAL least of all).
 * Each mode runs in a child process of its own (argument direct or handoff).
 * A call that has not ended 30 s after its step began fails the run (a hang),
 * and so does a crash. After each step the pool must still serve an ordinary
 * call correctly, unless none of its interpreters is in service.
 *
 * MANYPY_BEHAVIOUR_FUZZ_SEED and MANYPY_BEHAVIOUR_FUZZ_STEPS choose the seed
 * (default 1) and the number of steps per mode (default 40); the seed is
 * printed, so a failure can be replayed.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capi_test_support.h"

/* ---- the behaviours -------------------------------------------------------- */

typedef enum { RESULT_INT, RESULT_STRING, RESULT_TENSOR, RESULT_RAISES, RESULT_NEVER } result_kind;

typedef struct behaviour {
  const char* method;
  int has_arg; /* 1: the int64 `arg`; 2: the string `str_arg` */
  int64_t arg;
  const char* str_arg;
  result_kind kind;
  int64_t int_result; /* RESULT_INT: the value; RESULT_TENSOR: its element count */
  const char* text;   /* RESULT_STRING: the value; RESULT_RAISES: the exception type */
  int handoff_only;   /* fuzzed in HANDOFF mode only (see kBehaviours) */
} behaviour;

/* What each one does is in hostile.py. RESULT_NEVER: it runs until stopped,
 * catching the stop or not.
 *
 * spin_holding_lock_catching is fuzzed in HANDOFF mode only. It catches
 * every stop while it holds the model's lock, so its stop escalates and cuts
 * its clean-up short: the lock stays held. A call already waiting for that
 * lock in the same interpreter is in a lock wait that nothing in CPython
 * interrupts; in DIRECT mode that wait is on the host's own thread, which
 * then never returns (docs/threads.md says what DIRECT mode cannot promise),
 * while in HANDOFF mode the caller is released and the interpreter counted
 * lost. */
static const behaviour kBehaviours[] = {
    {"take_lock", 0, 0, NULL, RESULT_INT, 1, NULL, 0},
    {"log", 0, 0, NULL, RESULT_INT, 1, NULL, 0},
    {"matmul_dtype", 0, 0, NULL, RESULT_STRING, 0, "torch.float32", 0},
    {"fork_and_exit", 1, 3, NULL, RESULT_INT, 3, NULL, 0},
    {"data_loader", 1, 0, NULL, RESULT_INT, 140, NULL, 0}, /* 0 + 1 + 4 + ... + 49 */
    {"fresh_view", 1, 5, NULL, RESULT_TENSOR, 4, NULL, 0},
    {"keep_and_return_a_view", 1, 7, NULL, RESULT_TENSOR, 6, NULL, 0},
    {"raise_slow_message", 1, 0, NULL, RESULT_RAISES, 0, "SlowStr", 0},
    {"set_signal", 1, SIGUSR1, NULL, RESULT_RAISES, 0, "ValueError", 0},
    {"chdir", 2, 0, "/", RESULT_RAISES, 0, "ProcessStateRefused", 0},
    {"spin_holding_lock", 0, 0, NULL, RESULT_NEVER, 0, NULL, 0},
    {"spin_holding_lock_catching", 0, 0, NULL, RESULT_NEVER, 0, NULL, 1},
    {"spin_in_autocast", 0, 0, NULL, RESULT_NEVER, 0, NULL, 0},
    /* The stop-evasion forms (hostile.py's STOP_EVASIONS); hold_gil holds
     * the GIL in C for 3 s, so its interpreter is lost meanwhile. */
    {"evade_stop", 2, 0, "settrace_none", RESULT_NEVER, 0, NULL, 0},
    {"evade_stop", 2, 0, "bare_except", RESULT_NEVER, 0, NULL, 0},
    {"evade_stop", 2, 0, "profile", RESULT_NEVER, 0, NULL, 0},
    {"evade_stop", 2, 0, "monitoring", RESULT_NEVER, 0, NULL, 0},
    {"evade_stop", 2, 0, "switch_interval", RESULT_NEVER, 0, NULL, 0},
    {"evade_stop", 2, 0, "finalizers", RESULT_NEVER, 0, NULL, 0},
    {"evade_stop", 2, 0, "hold_gil", RESULT_NEVER, 0, NULL, 0},
};
enum { kBehaviourCount = sizeof kBehaviours / sizeof kBehaviours[0] };
enum { kMaxCallsPerStep = 4, kInterpreters = 2, kMaxInterpreters = 3 };

static uint64_t g_state;

static uint64_t next_random(void) {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}

static uint64_t below(uint64_t n) { return next_random() % n; }

/* ---- one call ---------------------------------------------------------------- */

typedef struct fuzz_call {
  const behaviour* b;
  manypy_object* model;
  int async;
  int32_t interpreter;     /* MANYPY_ANY_INTERPRETER or a member */
  int64_t timeout_ms;      /* 0: none */
  int64_t cancel_after_ms; /* < 0: never cancelled */
  manypy_cancel_token* token;
  double started;
  atomic_int cancelled; /* the token was cancelled (by the step) */
  /* The outcome, set once. */
  manypy_value* result;
  manypy_status* status;
  double ended;
  atomic_int done;
  pthread_t thread; /* a synchronous call's */
} fuzz_call;

static manypy_value* call_args(const behaviour* b) {
  manypy_value* args = manypy_value_new_tuple();
  if (b->has_arg == 1) ASSERT_OK(manypy_value_append(args, manypy_value_new_int64(b->arg)));
  if (b->has_arg == 2) ASSERT_OK(manypy_value_append(args, STRING(b->str_arg)));
  return args;
}

static manypy_call_options* call_options(fuzz_call* c) {
  manypy_call_options* options = CALL_OPTIONS(c->interpreter, c->timeout_ms);
  if (c->token != NULL) ASSERT_OK(manypy_call_options_set_cancel_token(options, c->token));
  return options;
}

static void finish(fuzz_call* c, manypy_value* result, manypy_status* status) {
  c->result = result;
  c->status = status;
  c->ended = capi_now();
  atomic_store(&c->done, 1);
}

static void call_done(void* user_data, manypy_value* result, manypy_status* status) {
  finish(user_data, result, status);
}

static void* run_sync(void* arg) {
  fuzz_call* c = arg;
  manypy_value* args = call_args(c->b);
  manypy_call_options* options = call_options(c);
  manypy_value* out = NULL;
  manypy_status* s = manypy_object_call(c->model, c->b->method, args, NULL, options, &out);
  manypy_call_options_free(options);
  manypy_value_free(args);
  finish(c, out, s);
  return NULL;
}

static void start(fuzz_call* c) {
  c->started = capi_now();
  if (!c->async) {
    assert_int_equal(pthread_create(&c->thread, NULL, run_sync, c), 0);
    return;
  }
  manypy_value* args = call_args(c->b);
  manypy_call_options* options = call_options(c);
  manypy_status* refused =
      manypy_object_call_async(c->model, c->b->method, args, NULL, options, call_done, c);
  manypy_call_options_free(options);
  manypy_value_free(args);
  /* A refusal is the call's outcome too (a pinned interpreter retired). */
  if (refused != NULL) finish(c, NULL, refused);
}

/* ---- what an outcome may be ------------------------------------------------- */

static int interpreter_serves(manypy_pool* pool, int32_t i) {
  manypy_status* s = manypy_pool_check_interpreter(pool, i);
  int ok = s == NULL;
  manypy_status_free(s);
  return ok;
}

static int any_interpreter_serves(manypy_pool* pool) {
  size_t n = manypy_pool_size(pool);
  for (size_t i = 0; i < n; ++i) {
    if (interpreter_serves(pool, (int32_t)i)) return 1;
  }
  return 0;
}

static void describe(const fuzz_call* c, char* out, size_t size) {
  char arg[64] = "";
  if (c->b->has_arg == 1) snprintf(arg, sizeof arg, "%" PRId64, c->b->arg);
  if (c->b->has_arg == 2) snprintf(arg, sizeof arg, "'%s'", c->b->str_arg);
  snprintf(out, size, "%s(%s) %s %s timeout %" PRId64 " ms cancel %" PRId64 " ms", c->b->method,
           arg, c->async ? "async" : "sync", c->interpreter < 0 ? "unpinned" : "pinned",
           c->timeout_ms, c->cancel_after_ms);
}

static void check_result(const fuzz_call* c, const char* what) {
  const behaviour* b = c->b;
  if (b->kind == RESULT_NEVER || b->kind == RESULT_RAISES) {
    fail_msg("%s: returned a value, but it never returns or always raises", what);
  }
  if (b->kind == RESULT_INT) {
    int64_t v = 0;
    ASSERT_OK(manypy_value_get_int64(c->result, &v));
    if (v != b->int_result) fail_msg("%s: %" PRId64 ", not %" PRId64, what, v, b->int_result);
  } else if (b->kind == RESULT_STRING) {
    const char* text = NULL;
    size_t length = 0;
    ASSERT_OK(manypy_value_get_string(c->result, &text, &length));
    if (strcmp(text, b->text) != 0) fail_msg("%s: '%s', not '%s'", what, text, b->text);
  } else {
    DLManagedTensor* t = NULL;
    ASSERT_OK(manypy_value_get_tensor(c->result, &t));
    int64_t numel = capi_numel(&t->dl_tensor);
    t->deleter(t);
    if (numel != b->int_result) {
      fail_msg("%s: %" PRId64 " elements, not %" PRId64, what, numel, b->int_result);
    }
  }
}

/* `type` is `name`, or a qualified name ending in it (a class of the
 * package's own module is <torch_package_0>.hostile.SlowStr). */
static int ends_with_name(const char* type, const char* name) {
  size_t t = strlen(type), n = strlen(name);
  if (t == n) return strcmp(type, name) == 0;
  return t > n && type[t - n - 1] == '.' && strcmp(type + t - n, name) == 0;
}

static uint64_t replaced(manypy_pool* pool) {
  manypy_pool_stats stats = {.struct_size = sizeof stats};
  ASSERT_OK(manypy_pool_get_stats(pool, &stats));
  return stats.replaced;
}

/* Checks one ended call's outcome against what it may be. `replaced_before`:
 * the pool's replacements when the step began. */
static void check_outcome(manypy_pool* pool, const fuzz_call* c, uint64_t replaced_before) {
  char what[256];
  describe(c, what, sizeof what);
  if (c->status == NULL) {
    check_result(c, what);
    return;
  }
  manypy_code code = manypy_status_code(c->status);
  const char* message = manypy_status_message(c->status);
  if (message == NULL || message[0] == '\0')
    fail_msg("%s: %s with no message", what, manypy_code_name(code));
  double elapsed_ms = (c->ended - c->started) * 1e3;
  switch (code) {
    case MANYPY_ERR_DEADLINE_EXCEEDED:
      if (c->timeout_ms == 0)
        fail_msg("%s: deadline exceeded without a deadline: %s", what, message);
      /* The clock's resolution and the call's own start leave a little slack. */
      if (elapsed_ms + 2 < (double)c->timeout_ms) {
        fail_msg("%s: deadline exceeded after %.1f ms: %s", what, elapsed_ms, message);
      }
      return;
    case MANYPY_ERR_CANCELLED:
      if (!atomic_load(&c->cancelled))
        fail_msg("%s: cancelled, but nobody cancelled: %s", what, message);
      return;
    case MANYPY_ERR_PYTHON: {
      const char* type = manypy_status_python_type(c->status);
      if (c->b->kind != RESULT_RAISES)
        fail_msg("%s: raised %s: %s", what, type ? type : "?", message);
      if (type == NULL || !ends_with_name(type, c->b->text)) {
        fail_msg("%s: raised %s, not %s: %s", what, type ? type : "(no type)", c->b->text, message);
      }
      return;
    }
    case MANYPY_ERR_INTERPRETER_BROKEN:
      /* Precise if it is still so now, or if the pinned interpreter was
       * replaced since (a replacement takes the same index). */
      if (c->interpreter >= 0) {
        if (interpreter_serves(pool, c->interpreter) && replaced(pool) == replaced_before) {
          fail_msg("%s: interpreter broken, but interpreter %d serves: %s", what, c->interpreter,
                   message);
        }
      } else if (any_interpreter_serves(pool)) {
        fail_msg("%s: interpreter broken for an unpinned call while an interpreter serves: %s",
                 what, message);
      }
      return;
    default:
      fail_msg("%s: %s: %s", what, manypy_code_name(code), message);
  }
}

/* ---- steps ------------------------------------------------------------------- */

static void random_call(fuzz_call* c, manypy_object* model, size_t pool_size,
                        manypy_thread_mode mode) {
  memset(c, 0, sizeof *c);
  do {
    c->b = &kBehaviours[below(kBehaviourCount)];
  } while (c->b->handoff_only && mode != MANYPY_THREAD_MODE_HANDOFF);
  c->model = model;
  c->async = (int)below(2);
  c->interpreter = below(4) == 0 ? (int32_t)below(pool_size) : MANYPY_ANY_INTERPRETER;
  /* A behaviour that never returns is always stopped, by a deadline, a
   * cancel, or both; the others get one half of the time. */
  int stop = c->b->kind == RESULT_NEVER ? 1 + (int)below(3) : (int)below(4);
  c->timeout_ms = (stop & 1) ? 20 + (int64_t)below(381) : 0;
  c->cancel_after_ms = (stop & 2) ? (int64_t)below(300) : -1;
  if (c->cancel_after_ms >= 0) {
    c->token = manypy_cancel_token_new();
    assert_non_null(c->token);
  }
}

/* Runs `count` calls at once and checks each outcome; fails on a hang. */
static void run_step(manypy_pool* pool, fuzz_call* calls, size_t count) {
  double t0 = capi_now();
  uint64_t replaced_before = replaced(pool);
  for (size_t i = 0; i < count; ++i) start(&calls[i]);
  for (;;) {
    size_t done = 0;
    double ms = (capi_now() - t0) * 1e3;
    for (size_t i = 0; i < count; ++i) {
      fuzz_call* c = &calls[i];
      if (c->token != NULL && !atomic_load(&c->cancelled) && ms >= (double)c->cancel_after_ms) {
        atomic_store(&c->cancelled, 1);
        manypy_cancel_token_cancel(c->token);
      }
      done += (size_t)atomic_load(&c->done);
    }
    if (done == count) break;
    if (ms > 30000) {
      for (size_t i = 0; i < count; ++i) {
        char what[256];
        describe(&calls[i], what, sizeof what);
        fprintf(stderr, "  %s: %s\n", what,
                atomic_load(&calls[i].done) ? "ended" : "STILL RUNNING");
      }
      fail_msg("a step's calls have not all ended in 30 s (seed %" PRIu64 ")", g_state);
    }
    usleep(1000);
  }
  for (size_t i = 0; i < count; ++i) {
    fuzz_call* c = &calls[i];
    if (!c->async) assert_int_equal(pthread_join(c->thread, NULL), 0);
    check_outcome(pool, c, replaced_before);
    manypy_value_free(c->result);
    manypy_status_free(c->status);
    manypy_cancel_token_free(c->token);
  }
}

/* An ordinary call, unpinned, must return its result while any interpreter
 * of the pool serves. */
static void check_still_serves(manypy_pool* pool, manypy_object* model) {
  if (!any_interpreter_serves(pool)) return;
  manypy_value* args = manypy_value_new_tuple();
  manypy_call_options* options = CALL_OPTIONS(MANYPY_ANY_INTERPRETER, 20000);
  manypy_value* out = NULL;
  ASSERT_OK(manypy_object_call(model, "take_lock", args, NULL, options, &out));
  int64_t v = 0;
  ASSERT_OK(manypy_value_get_int64(out, &v));
  assert_int_equal(v, 1);
  manypy_value_free(out);
  manypy_call_options_free(options);
  manypy_value_free(args);
}

static void fuzz(manypy_thread_mode mode) {
  uint64_t seed = 1;
  long steps = 40;
  if (getenv("MANYPY_BEHAVIOUR_FUZZ_SEED"))
    seed = strtoull(getenv("MANYPY_BEHAVIOUR_FUZZ_SEED"), NULL, 10);
  if (getenv("MANYPY_BEHAVIOUR_FUZZ_STEPS"))
    steps = strtol(getenv("MANYPY_BEHAVIOUR_FUZZ_STEPS"), NULL, 10);
  g_state = seed * 2654435761u + (uint64_t)mode + 1;
  printf("behaviour fuzzer: %s mode, seed %" PRIu64 ", %ld steps\n",
         mode == MANYPY_THREAD_MODE_DIRECT ? "DIRECT" : "HANDOFF", seed, steps);

  manypy_pool_options* options = manypy_pool_options_new();
  ASSERT_OK(manypy_pool_options_set_interpreters(options, kInterpreters));
  ASSERT_OK(manypy_pool_options_set_max_interpreters(options, kMaxInterpreters));
  ASSERT_OK(manypy_pool_options_set_thread_mode(options, mode));
  manypy_pool* pool = NULL;
  ASSERT_OK(manypy_pool_create(options, &pool));
  manypy_pool_options_free(options);
  manypy_package* package = LOAD_PACKAGE(pool, "hostile.pt");
  manypy_object* model = LOAD_MODEL(package);

  fuzz_call calls[kMaxCallsPerStep];
  for (long step = 0; step < steps; ++step) {
    size_t count = 1 + (size_t)below(kMaxCallsPerStep);
    size_t pool_size = manypy_pool_size(pool);
    for (size_t i = 0; i < count; ++i) random_call(&calls[i], model, pool_size, mode);
    run_step(pool, calls, count);
    check_still_serves(pool, model);
  }

  manypy_pool_stats stats = {.struct_size = sizeof stats};
  ASSERT_OK(manypy_pool_get_stats(pool, &stats));
  printf("  completed: ok %" PRIu64 ", deadline %" PRIu64 ", cancelled %" PRIu64 ", python %" PRIu64
         ", broken %" PRIu64 "; interpreters %zu, broken %zu, replaced %" PRIu64 "\n",
         stats.completed[MANYPY_OK], stats.completed[MANYPY_ERR_DEADLINE_EXCEEDED],
         stats.completed[MANYPY_ERR_CANCELLED], stats.completed[MANYPY_ERR_PYTHON],
         stats.completed[MANYPY_ERR_INTERPRETER_BROKEN], stats.interpreters, stats.broken,
         stats.replaced);
  assert_int_equal(stats.completed[MANYPY_ERR_INTERNAL], 0);
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

static manypy_thread_mode g_mode;

static void test_fuzz(void** state) {
  (void)state;
  fuzz(g_mode);
}

/* Each mode runs in a process of its own: every stop that escalates retires
 * an interpreter for the rest of the process, and retired ones keep their
 * share of the process's 15 (docs/isolation.md). */
static int run_mode(const char* self, const char* mode) {
  pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, mode, (char*)NULL);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "%s mode: %s %d\n", mode, WIFEXITED(status) ? "exit" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    int direct = run_mode("/proc/self/exe", "direct");
    int handoff = run_mode("/proc/self/exe", "handoff");
    return direct || handoff;
  }
  if (strcmp(argv[1], "direct") == 0) {
    g_mode = MANYPY_THREAD_MODE_DIRECT;
  } else if (strcmp(argv[1], "handoff") == 0) {
    g_mode = MANYPY_THREAD_MODE_HANDOFF;
  } else {
    fprintf(stderr, "usage: %s [direct|handoff]\n", argv[0]);
    return 2;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_fuzz)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
