/*
 * manypy_soak: does the process's memory stay flat over a long run?
 *
 * Soak (the default): T threads (8) each make M calls (100,000) of
 * python_heavy.pt through one pool of I interpreters (2), with
 * MANYPY_ANY_INTERPRETER, in DIRECT or HANDOFF mode. Every call builds its
 * own input: a tensor borrowed over the thread's buffer, whose release must
 * have run once by the time the call's values are freed. Every result is
 * checked against python_heavy.expected.{logits,norm}.bin with the tolerance
 * of tests/capi/capi_objects.c (|got - want| <= 1e-5 (|want| + max|want|))
 * and steps == 5 (kwargs steps=5, normalize=False).
 *
 * Churn (--churn SECONDS): the same callers, for that long, while other
 * threads load and free packages on the callers' pool, create and destroy
 * one-interpreter pools (with a package and an object each), add and remove
 * operator callbacks and start and free the profiler, set and unset the API
 * usage handler, and start short-lived threads that make one call each.
 * --churn-only picks some of these (to find out which one grows).
 *
 * Memory is sampled every --interval seconds and at every --step % of
 * progress (calls, or time in churn mode): RSS, Pss, Private_Dirty and
 * Anonymous from /proc/self/smaps_rollup. The curve goes to stdout.
 *
 * The verdict: the warm-up is the first --warmup % of the calls (of the
 * time in churn mode). The baseline is the first sample taken at or after
 * the end of the warm-up; every later sample's RSS must stay within
 * +-(--max-drift) % of it. --quick (8 x 2,000 calls, the ctest entry) uses a
 * warm-up of 50%: the second half of the run must stay within the bound of
 * the RSS at its middle (see docs/memory.md).
 *
 * --diagnose prints, at the baseline and at the end, where the memory is:
 * the host libc's malloc (mallinfo2), each interpreter's namespace libc
 * (mallinfo2 through ctypes inside it), Python's allocated blocks, gc
 * objects, linecache entries and modules, and /proc/self/smaps grouped by
 * kind of mapping, with the groups that grew. On by default in churn mode.
 *
 * Exit status: 0 the verdict holds; 1 a call failed, a result was wrong or
 * the command line is wrong; 2 every call succeeded but RSS drifted beyond
 * the bound.
 *
 * Uses only the public C API (manypy.h), pthreads, glibc's mallinfo2 and
 * /proc.
 *
 * Usage: manypy_soak [options]
 *   --threads N        calling threads (default 8)
 *   --calls M          calls per thread (default 100000)
 *   --interpreters I   interpreters in the callers' pool (default 2)
 *   --mode direct|handoff   thread mode (default direct)
 *   --interval S       seconds between time-based samples (default 10;
 *                      --quick: 1)
 *   --step P           also sample every P % of progress (default 5)
 *   --warmup P         warm-up, % of the calls or time (default 10; --quick: 50)
 *   --max-drift P      the RSS bound after warm-up, +-% (default 5)
 *   --quick            8 threads x 2,000 calls (the ctest entry)
 *   --churn S          churn mode for S seconds (callers: --threads, default
 *                      8, calling until the end)
 *   --churn-only LIST  comma-separated subset of packages,pools,callbacks,
 *                      profiler,usage,threads (default: all)
 *   --diagnose         memory breakdown at the baseline and at the end
 *   --csv FILE         also write the samples to FILE
 *   --archives DIR     the sample archives (default: the build's; the
 *                      environment variable MANYPY_ARCHIVES overrides it)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "manypy.h"

#ifndef MANYPY_SOAK_ARCHIVES
#define MANYPY_SOAK_ARCHIVES "archives"
#endif

#define PROG "manypy_soak"
#define MAX_INTERPRETERS 16

/* python_heavy's expected files: input [4, 64]; kwargs steps=5,
 * normalize=False; logits [4, 10], norm [4], steps 5. */
#define HEAVY_BATCH 4
#define HEAVY_WIDTH 64
#define HEAVY_CLASSES 10
#define HEAVY_STEPS 5
#define RTOL 1e-5

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double seconds) {
  struct timespec ts;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void die(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char* fmt, ...) {
  va_list ap;
  fflush(stdout);
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", PROG);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void die_status(const char* what, manypy_status* st) __attribute__((noreturn));
static void die_status(const char* what, manypy_status* st) {
  fflush(stdout);
  fprintf(stderr, "%s: %s failed: %s: %s\n", PROG, what, manypy_code_name(manypy_status_code(st)),
          manypy_status_message(st));
  const char* tb = manypy_status_traceback(st);
  if (tb && *tb) fprintf(stderr, "%s", tb);
  manypy_status_free(st);
  exit(1);
}

#define CHECK(call, what)                   \
  do {                                      \
    manypy_status* st_ = (call);            \
    if (st_ != NULL) die_status(what, st_); \
  } while (0)

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) die("out of memory (%zu bytes)", n);
  return p;
}

static double mb(long kb) { return (double)kb / 1024.0; }

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

enum {
  CHURN_PACKAGES = 1 << 0,
  CHURN_POOLS = 1 << 1,
  CHURN_CALLBACKS = 1 << 2,
  CHURN_PROFILER = 1 << 3,
  CHURN_USAGE = 1 << 4,
  CHURN_THREADS = 1 << 5,
  CHURN_ALL = (1 << 6) - 1
};
static const char* const kChurnNames[] = {"packages", "pools", "callbacks",
                                          "profiler", "usage", "threads"};
#define CHURN_KINDS 6

typedef struct options {
  int threads;
  long calls;
  int interpreters;
  manypy_thread_mode mode;
  double interval;
  double step;
  double warmup;
  double max_drift;
  int quick;
  double churn_seconds; /* 0: soak */
  unsigned churn_kinds;
  int diagnose;
  const char* csv;
  const char* archives;
} options;

static options g_opt;

static void usage_exit(void) {
  fprintf(stderr,
          "usage: %s [--threads N] [--calls M] [--interpreters I] [--mode direct|handoff]\n"
          "          [--interval S] [--step P] [--warmup P] [--max-drift P] [--quick]\n"
          "          [--churn S] [--churn-only LIST] [--diagnose] [--csv FILE]\n"
          "          [--archives DIR]\n",
          PROG);
  exit(1);
}

static double parse_number(const char* flag, const char* text, double lo, double hi) {
  char* end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= lo && v <= hi)) {
    die("%s: %s is not a number in [%g, %g]", flag, text, lo, hi);
  }
  return v;
}

static unsigned parse_churn_kinds(const char* list) {
  unsigned kinds = 0;
  char* copy = strdup(list);
  if (!copy) die("out of memory");
  for (char *save = NULL, *name = strtok_r(copy, ",", &save); name;
       name = strtok_r(NULL, ",", &save)) {
    int k = 0;
    while (k < CHURN_KINDS && strcmp(name, kChurnNames[k]) != 0) ++k;
    if (k == CHURN_KINDS) {
      die("--churn-only: unknown kind '%s' (packages, pools, callbacks, profiler, usage, "
          "threads)",
          name);
    }
    kinds |= 1u << k;
  }
  free(copy);
  return kinds;
}

static void parse_options(int argc, char** argv) {
  options o = {8,  100000, 2,   MANYPY_THREAD_MODE_DIRECT, -1, 5, -1, 5, 0, 0, CHURN_ALL,
               -1, NULL,   NULL};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDS_VALUE     \
  if (!v) usage_exit(); \
  ++i
    if (strcmp(a, "--threads") == 0) {
      NEEDS_VALUE;
      o.threads = (int)parse_number(a, v, 1, 256);
    } else if (strcmp(a, "--calls") == 0) {
      NEEDS_VALUE;
      o.calls = (long)parse_number(a, v, 1, 1e9);
    } else if (strcmp(a, "--interpreters") == 0) {
      NEEDS_VALUE;
      o.interpreters = (int)parse_number(a, v, 1, MAX_INTERPRETERS - 1);
    } else if (strcmp(a, "--mode") == 0) {
      NEEDS_VALUE;
      if (strcmp(v, "direct") == 0) {
        o.mode = MANYPY_THREAD_MODE_DIRECT;
      } else if (strcmp(v, "handoff") == 0) {
        o.mode = MANYPY_THREAD_MODE_HANDOFF;
      } else {
        die("--mode: direct or handoff, not %s", v);
      }
    } else if (strcmp(a, "--interval") == 0) {
      NEEDS_VALUE;
      o.interval = parse_number(a, v, 0.05, 3600);
    } else if (strcmp(a, "--step") == 0) {
      NEEDS_VALUE;
      o.step = parse_number(a, v, 0.1, 100);
    } else if (strcmp(a, "--warmup") == 0) {
      NEEDS_VALUE;
      o.warmup = parse_number(a, v, 0, 99);
    } else if (strcmp(a, "--max-drift") == 0) {
      NEEDS_VALUE;
      o.max_drift = parse_number(a, v, 0, 1000);
    } else if (strcmp(a, "--quick") == 0) {
      o.quick = 1;
    } else if (strcmp(a, "--churn") == 0) {
      NEEDS_VALUE;
      o.churn_seconds = parse_number(a, v, 1, 1e7);
    } else if (strcmp(a, "--churn-only") == 0) {
      NEEDS_VALUE;
      o.churn_kinds = parse_churn_kinds(v);
    } else if (strcmp(a, "--diagnose") == 0) {
      o.diagnose = 1;
    } else if (strcmp(a, "--csv") == 0) {
      NEEDS_VALUE;
      o.csv = v;
    } else if (strcmp(a, "--archives") == 0) {
      NEEDS_VALUE;
      o.archives = v;
    } else {
      usage_exit();
    }
#undef NEEDS_VALUE
  }
  if (o.quick) {
    o.threads = 8;
    o.calls = 2000;
  }
  if (o.interval < 0) o.interval = o.quick ? 1 : 10;
  if (o.warmup < 0) o.warmup = o.quick ? 50 : 10;
  if (o.diagnose < 0) o.diagnose = o.churn_seconds > 0;
  if (!o.archives) o.archives = getenv("MANYPY_ARCHIVES");
  if (!o.archives || !*o.archives) o.archives = MANYPY_SOAK_ARCHIVES;
  g_opt = o;
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct mem {
  long rss_kb, pss_kb, dirty_kb, anon_kb;
} mem;

/* /proc/self/smaps_rollup. */
static mem read_mem(void) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) die("cannot open /proc/self/smaps_rollup: %s", strerror(errno));
  mem m = {-1, -1, -1, -1};
  char line[256];
  while (fgets(line, sizeof line, f)) {
    long v;
    if (sscanf(line, "Rss: %ld kB", &v) == 1) m.rss_kb = v;
    if (sscanf(line, "Pss: %ld kB", &v) == 1) m.pss_kb = v;
    if (sscanf(line, "Private_Dirty: %ld kB", &v) == 1) m.dirty_kb = v;
    if (sscanf(line, "Anonymous: %ld kB", &v) == 1) m.anon_kb = v;
  }
  fclose(f);
  if (m.rss_kb < 0 || m.pss_kb < 0 || m.dirty_kb < 0 || m.anon_kb < 0) {
    die("/proc/self/smaps_rollup lacks Rss, Pss, Private_Dirty or Anonymous");
  }
  return m;
}

/* Threads of the process, from /proc/self/status. */
static long process_threads(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long n = -1;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "Threads: %ld", &n) == 1) break;
  }
  fclose(f);
  return n;
}

typedef struct sample {
  double t;   /* seconds since the callers started */
  long calls; /* calls done by then (every kind) */
  mem m;
} sample;

typedef struct curve {
  pthread_mutex_t mu;
  sample* v;
  size_t n, cap;
} curve;

static curve g_curve = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static void curve_add(double t, long calls, mem m) {
  pthread_mutex_lock(&g_curve.mu);
  if (g_curve.n == g_curve.cap) {
    g_curve.cap = g_curve.cap ? 2 * g_curve.cap : 256;
    g_curve.v = realloc(g_curve.v, g_curve.cap * sizeof *g_curve.v);
    if (!g_curve.v) die("out of memory");
  }
  g_curve.v[g_curve.n++] = (sample){t, calls, m};
  pthread_mutex_unlock(&g_curve.mu);
}

/* /proc/self/smaps grouped by kind of mapping, for --diagnose. */
#define MAX_GROUPS 4096
typedef struct group {
  char name[96];
  long rss_kb, dirty_kb, vm_kb;
  long count;
} group;

typedef struct smaps_view {
  group* g;
  int n;
} smaps_view;

static group* group_of(smaps_view* s, const char* name) {
  for (int k = 0; k < s->n; ++k) {
    if (strcmp(s->g[k].name, name) == 0) return &s->g[k];
  }
  if (s->n == MAX_GROUPS) return &s->g[MAX_GROUPS - 1];
  group* g = &s->g[s->n++];
  memset(g, 0, sizeof *g);
  snprintf(g->name, sizeof g->name, "%s", name);
  return g;
}

/* Kinds: the host libc's brk heap ([heap]); anonymous mappings that start on
 * a 64 MiB boundary (glibc's per-thread malloc arenas, of any libc, reserve
 * 64 MiB aligned heaps); other anonymous mappings (mmap'd malloc chunks,
 * every namespace libc's main arena, which cannot use brk, pymalloc's
 * arenas, thread stacks); file mappings by file name (summed over every
 * namespace that maps the file). */
static smaps_view read_smaps(void) {
  smaps_view s = {calloc(MAX_GROUPS, sizeof(group)), 0};
  if (!s.g) die("out of memory");
  FILE* f = fopen("/proc/self/smaps", "r");
  if (!f) die("cannot open /proc/self/smaps: %s", strerror(errno));
  char line[4096];
  group* cur = NULL;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi, off;
    char perms[8];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off, &path_at) == 4 &&
        strchr(line, '-') && path_at > 0) {
      char* path = line + path_at;
      path[strcspn(path, "\n")] = '\0';
      char name[96];
      if (*path == '\0') {
        if (perms[0] != 'r') {
          snprintf(name, sizeof name, "anon, no access (reserved)");
        } else if (lo % (64ul << 20) == 0) {
          snprintf(name, sizeof name, "anon, 64 MiB aligned (malloc arena heaps)");
        } else {
          snprintf(name, sizeof name, "anon, other");
        }
      } else if (*path == '[') {
        snprintf(name, sizeof name, "%s", strncmp(path, "[stack", 6) == 0 ? "[stack]" : path);
      } else {
        const char* base = strrchr(path, '/');
        snprintf(name, sizeof name, "file %s", base ? base + 1 : path);
      }
      cur = group_of(&s, name);
      cur->vm_kb += (long)((hi - lo) >> 10);
      cur->count++;
      continue;
    }
    long v;
    if (cur && sscanf(line, "Rss: %ld kB", &v) == 1) cur->rss_kb += v;
    if (cur && sscanf(line, "Private_Dirty: %ld kB", &v) == 1) cur->dirty_kb += v;
  }
  fclose(f);
  return s;
}

static long group_rss(const smaps_view* s, const char* name) {
  for (int k = 0; k < s->n; ++k) {
    if (strcmp(s->g[k].name, name) == 0) return s->g[k].rss_kb;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* python_heavy                                                             */
/* ------------------------------------------------------------------------ */

static float g_input[HEAVY_BATCH * HEAVY_WIDTH];
static float g_logits[HEAVY_BATCH * HEAVY_CLASSES];
static float g_norm[HEAVY_BATCH];

static void archive_path(char* out, size_t size, const char* name) {
  snprintf(out, size, "%s/%s", g_opt.archives, name);
}

static void read_f32(const char* name, float* out, size_t count) {
  char path[4096];
  archive_path(path, sizeof path, name);
  FILE* f = fopen(path, "rb");
  if (!f) {
    die("cannot open %s: %s (build the target manypy_archives, or pass --archives DIR)", path,
        strerror(errno));
  }
  size_t got = fread(out, sizeof(float), count, f);
  int extra = fgetc(f);
  fclose(f);
  if (got != count || extra != EOF) die("%s does not hold exactly %zu float32", path, count);
}

/* Thread-safe, non-asserting: `v` is a float32 tensor of the given shape
 * within RTOL of `want` (the rule of tests/capi's capi_assert_f32_tensor). */
static int check_f32(const manypy_value* v, const char* what, int32_t ndim, const int64_t* shape,
                     const float* want, char* why, size_t size) {
  if (manypy_value_get_kind(v) != MANYPY_VALUE_TENSOR) {
    snprintf(why, size, "%s is not a tensor", what);
    return 0;
  }
  DLManagedTensor* m = NULL;
  manypy_status* s = manypy_value_get_tensor(v, &m);
  if (s != NULL) {
    snprintf(why, size, "%s: get_tensor: %s", what, manypy_status_message(s));
    manypy_status_free(s);
    return 0;
  }
  const DLTensor* t = &m->dl_tensor;
  int ok = t->device.device_type == kDLCPU && t->dtype.code == kDLFloat && t->dtype.bits == 32 &&
           t->dtype.lanes == 1 && t->ndim == ndim;
  int64_t n = 1;
  for (int32_t k = 0; ok && k < ndim; ++k) {
    ok = t->shape[k] == shape[k];
    n *= shape[k];
  }
  if (!ok) snprintf(why, size, "%s: wrong dtype, device or shape", what);
  double scale = 0;
  for (int64_t k = 0; k < n; ++k) scale = fmax(scale, fabs(want[k]));
  for (int64_t k = 0; ok && k < n; ++k) {
    /* C-contiguous or strided: walk the C-order index through the strides. */
    int64_t offset = 0, rest = k;
    for (int32_t d = ndim - 1; d >= 0; --d) {
      int64_t i = rest % t->shape[d];
      rest /= t->shape[d];
      int64_t stride = 1;
      if (t->strides) {
        stride = t->strides[d];
      } else {
        for (int32_t e = d + 1; e < ndim; ++e) stride *= t->shape[e];
      }
      offset += i * stride;
    }
    float got;
    memcpy(&got, (const char*)t->data + t->byte_offset + offset * 4, 4);
    if (!(fabs((double)got - want[k]) <= RTOL * (fabs(want[k]) + scale))) {
      snprintf(why, size, "%s element %lld: %.9g, expected %.9g", what, (long long)k, got, want[k]);
      ok = 0;
    }
  }
  m->deleter(m);
  return ok;
}

/* python_heavy's result: {"logits": [4, 10], "norm": [4], "steps": 5}, in
 * that order. Returns 1 if it checks out, else 0 with `why`. */
static int check_heavy(const manypy_value* result, char* why, size_t size) {
  static const char* const keys[3] = {"logits", "norm", "steps"};
  static const int64_t logits_shape[2] = {HEAVY_BATCH, HEAVY_CLASSES};
  static const int64_t norm_shape[1] = {HEAVY_BATCH};
  size_t n = 0;
  manypy_status* s = manypy_value_length(result, &n);
  if (s == NULL && (manypy_value_get_kind(result) != MANYPY_VALUE_DICT || n != 3)) {
    snprintf(why, size, "not a dict of 3 entries");
    return 0;
  }
  const manypy_value* items[3] = {NULL, NULL, NULL};
  for (size_t k = 0; s == NULL && k < 3; ++k) {
    const char* key = NULL;
    s = manypy_value_dict_key(result, k, &key, NULL);
    if (s == NULL && strcmp(key, keys[k]) != 0) {
      snprintf(why, size, "key %zu is '%s', expected '%s'", k, key, keys[k]);
      return 0;
    }
    if (s == NULL) s = manypy_value_get_item(result, k, &items[k]);
  }
  int64_t steps = -1;
  if (s == NULL) s = manypy_value_get_int64(items[2], &steps);
  if (s != NULL) {
    snprintf(why, size, "%s: %s", manypy_code_name(manypy_status_code(s)),
             manypy_status_message(s));
    manypy_status_free(s);
    return 0;
  }
  if (steps != HEAVY_STEPS) {
    snprintf(why, size, "steps %lld, expected %d", (long long)steps, HEAVY_STEPS);
    return 0;
  }
  return check_f32(items[0], "logits", 2, logits_shape, g_logits, why, size) &&
         check_f32(items[1], "norm", 1, norm_shape, g_norm, why, size);
}

static void count_release(void* ctx) { atomic_fetch_add((atomic_long*)ctx, 1); }

/* One python_heavy call with a fresh input over `buffer` (a copy of the
 * expected input, borrowed), checked. *released counts the buffer's
 * releases: it must have gone up by exactly one once the values are freed.
 * Returns 1 if everything checked out, else 0 with `why`. */
static int heavy_call(manypy_object* model, const manypy_value* kwargs,
                      const manypy_call_options* call_options, float* buffer, atomic_long* released,
                      char* why, size_t size) {
  static const int64_t shape[2] = {HEAVY_BATCH, HEAVY_WIDTH};
  const long released_before = atomic_load(released);
  manypy_value* x = NULL;
  manypy_value* args = manypy_value_new_list();
  manypy_value* result = NULL;
  if (!args) die("out of memory");
  manypy_status* s =
      manypy_value_new_tensor_from_buffer(buffer, sizeof g_input, (DLDataType){kDLFloat, 32, 1}, 2,
                                          shape, NULL, /*copy=*/0, count_release, released, &x);
  if (s == NULL) s = manypy_value_append(args, x);
  if (s == NULL) s = manypy_object_call(model, NULL, args, kwargs, call_options, &result);
  int ok = 0;
  if (s != NULL) {
    snprintf(why, size, "%s: %s", manypy_code_name(manypy_status_code(s)),
             manypy_status_message(s));
    manypy_status_free(s);
  } else {
    ok = check_heavy(result, why, size);
  }
  manypy_value_free(result);
  manypy_value_free(args);
  if (ok && atomic_load(released) != released_before + 1) {
    snprintf(why, size, "the input's release ran %ld times, expected once",
             atomic_load(released) - released_before);
    ok = 0;
  }
  if (ok && memcmp(buffer, g_input, sizeof g_input) != 0) {
    snprintf(why, size, "the model wrote into its borrowed input");
    ok = 0;
  }
  return ok;
}

static manypy_value* heavy_kwargs(void) {
  manypy_value* kwargs = manypy_value_new_dict();
  if (!kwargs) die("out of memory");
  CHECK(manypy_value_dict_set(kwargs, "steps", manypy_value_new_int64(HEAVY_STEPS)),
        "manypy_value_dict_set");
  CHECK(manypy_value_dict_set(kwargs, "normalize", manypy_value_new_bool(0)),
        "manypy_value_dict_set");
  return kwargs;
}

/* ------------------------------------------------------------------------ */
/* Errors, shared by every thread                                           */
/* ------------------------------------------------------------------------ */

static atomic_long g_errors;
static pthread_mutex_t g_error_mu = PTHREAD_MUTEX_INITIALIZER;

static void report_error(const char* who, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void report_error(const char* who, const char* fmt, ...) {
  long n = atomic_fetch_add(&g_errors, 1);
  if (n >= 10) return; /* the first ten are printed */
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&g_error_mu);
  fprintf(stderr, "%s: ERROR (%s): ", PROG, who);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  pthread_mutex_unlock(&g_error_mu);
  va_end(ap);
}

/* A failed status as an error; returns 1 if there was one (and frees it). */
static int status_error(const char* who, const char* what, manypy_status* s) {
  if (s == NULL) return 0;
  report_error(who, "%s: %s: %s", what, manypy_code_name(manypy_status_code(s)),
               manypy_status_message(s));
  manypy_status_free(s);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Callers                                                                  */
/* ------------------------------------------------------------------------ */

static manypy_pool* g_pool;
static manypy_object* g_model;
static manypy_value* g_kwargs;
static atomic_long g_calls_done; /* callers' verified calls */
static atomic_long g_churn_ops;  /* churn cycles */
static atomic_int g_stop;        /* churn mode: stop everything */

typedef struct caller {
  int index;
  long calls; /* 0: until g_stop */
  pthread_t thread;
} caller;

static void* caller_main(void* arg) {
  caller* c = arg;
  float* buffer = xmalloc(sizeof g_input);
  memcpy(buffer, g_input, sizeof g_input);
  atomic_long released = 0;
  char why[512];
  char who[32];
  snprintf(who, sizeof who, "caller %d", c->index);
  for (long k = 0; c->calls == 0 ? !atomic_load(&g_stop) : k < c->calls; ++k) {
    if (!heavy_call(g_model, g_kwargs, NULL, buffer, &released, why, sizeof why)) {
      report_error(who, "call %ld: %s", k, why);
      if (atomic_load(&g_errors) > 100) break; /* broken: no point going on */
    }
    atomic_fetch_add(&g_calls_done, 1);
  }
  free(buffer);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Churn                                                                    */
/* ------------------------------------------------------------------------ */

static atomic_long g_churn_cycles[CHURN_KINDS];
static atomic_long g_op_events;

static void count_event(const manypy_op_event* event, void* user_data) {
  (void)event;
  atomic_fetch_add((atomic_long*)user_data, 1);
}

static void count_key(const char* key, void* user_data) {
  (void)key;
  ++*(long*)user_data; /* called under the library's lock */
}

static manypy_call_options* pinned(int32_t interpreter) {
  manypy_call_options* o = manypy_call_options_new();
  if (!o) die("out of memory");
  CHECK(manypy_call_options_set_interpreter(o, interpreter), "set_interpreter");
  return o;
}

/* Load python_heavy.pt into the callers' pool, call it on each interpreter
 * (so that every interpreter opens the package and unpickles a replica),
 * free it. */
static void churn_packages(void) {
  const char* who = "churn packages";
  char path[4096], why[512];
  archive_path(path, sizeof path, "python_heavy.pt");
  manypy_package* pkg = NULL;
  manypy_object* obj = NULL;
  if (status_error(who, "package_load_file", manypy_package_load_file(g_pool, path, &pkg)) ||
      status_error(who, "load_pickle",
                   manypy_package_load_pickle(pkg, "model", "model.pkl", &obj))) {
    manypy_package_free(pkg);
    return;
  }
  float* buffer = xmalloc(sizeof g_input);
  memcpy(buffer, g_input, sizeof g_input);
  atomic_long released = 0;
  for (int i = 0; i < g_opt.interpreters; ++i) {
    manypy_call_options* o = pinned(i);
    if (!heavy_call(obj, g_kwargs, o, buffer, &released, why, sizeof why)) {
      report_error(who, "interpreter %d: %s", i, why);
    }
    manypy_call_options_free(o);
  }
  free(buffer);
  manypy_object_free(obj);
  manypy_package_free(pkg);
}

/* A pool of its own (one more interpreter, leased and given back), with
 * identity.pt loaded and called, then destroyed. */
static void churn_pools(void) {
  const char* who = "churn pools";
  manypy_pool_options* po = manypy_pool_options_new();
  if (!po) die("out of memory");
  CHECK(manypy_pool_options_set_interpreters(po, 1), "set_interpreters");
  CHECK(manypy_pool_options_set_thread_mode(po, g_opt.mode), "set_thread_mode");
  manypy_pool* pool = NULL;
  manypy_status* s = manypy_pool_create(po, &pool);
  manypy_pool_options_free(po);
  if (status_error(who, "pool_create", s)) return;
  char path[4096];
  archive_path(path, sizeof path, "identity.pt");
  manypy_package* pkg = NULL;
  manypy_object* obj = NULL;
  manypy_value* args = manypy_value_new_list();
  manypy_value* r = NULL;
  int64_t got = -1;
  long cycle = atomic_load(&g_churn_cycles[1]);
  if (!status_error(who, "pool_exec", manypy_pool_exec(pool, 0, "churn_global = 7")) &&
      !status_error(who, "package_load_file", manypy_package_load_file(pool, path, &pkg)) &&
      !status_error(who, "load_pickle",
                    manypy_package_load_pickle(pkg, "model", "model.pkl", &obj)) &&
      !status_error(who, "append", manypy_value_append(args, manypy_value_new_int64(cycle))) &&
      !status_error(who, "object_call", manypy_object_call(obj, NULL, args, NULL, NULL, &r)) &&
      !status_error(who, "get_int64", manypy_value_get_int64(r, &got)) && got != cycle) {
    report_error(who, "identity(%ld) returned %lld", cycle, (long long)got);
  }
  manypy_value_free(r);
  manypy_value_free(args);
  manypy_object_free(obj);
  manypy_package_free(pkg);
  manypy_pool_destroy(pool);
}

/* Operator callbacks (with inputs, every operator) for a while, removed. */
static void churn_callbacks(void) {
  atomic_long* counter = xmalloc(sizeof *counter);
  atomic_init(counter, 0);
  uint64_t id = 0;
  if (status_error("churn callbacks", "add_op_callbacks",
                   manypy_add_op_callbacks(count_event, count_event, counter, free, 1.0, 1, &id))) {
    return;
  }
  sleep_s(0.02);
  atomic_fetch_add(&g_op_events, atomic_load(counter));
  status_error("churn callbacks", "remove_op_callbacks", manypy_remove_op_callbacks(id));
}

/* The profiler for a while; its three exports; freed. */
static void churn_profiler(void) {
  const char* who = "churn profiler";
  manypy_profiler* p = NULL;
  if (status_error(who, "profiler_start", manypy_profiler_start(0.5, &p))) return;
  sleep_s(0.05);
  manypy_profile_entry* entries = NULL;
  size_t count = 0;
  manypy_value* text = NULL;
  manypy_value* json = NULL;
  if (!status_error(who, "snapshot", manypy_profiler_snapshot(p, &entries, &count))) {
    manypy_profile_entries_free(entries, count);
  }
  status_error(who, "prometheus", manypy_profiler_prometheus(p, &text));
  status_error(who, "chrome_trace", manypy_profiler_chrome_trace(p, &json));
  manypy_value_free(text);
  manypy_value_free(json);
  manypy_profiler_free(p);
}

/* The API usage handler set (it is told every key seen so far), one of 16
 * keys logged, the handler removed. */
static void churn_usage(void) {
  const char* who = "churn usage";
  long* seen = xmalloc(sizeof *seen);
  *seen = 0;
  if (status_error(who, "set_api_usage_handler",
                   manypy_set_api_usage_handler(count_key, seen, free))) {
    return;
  }
  char key[64];
  snprintf(key, sizeof key, "manypy.soak.key%ld", atomic_load(&g_churn_cycles[4]) % 16);
  status_error(who, "log_api_usage", manypy_log_api_usage(key));
  status_error(who, "set_api_usage_handler", manypy_set_api_usage_handler(NULL, NULL, NULL));
  sleep_s(0.002);
}

/* A thread that makes one call and exits. */
static void* one_call_thread(void* arg) {
  (void)arg;
  float buffer[HEAVY_BATCH * HEAVY_WIDTH];
  memcpy(buffer, g_input, sizeof g_input);
  atomic_long released = 0;
  char why[512];
  if (!heavy_call(g_model, g_kwargs, NULL, buffer, &released, why, sizeof why)) {
    report_error("churn threads", "%s", why);
  }
  return NULL;
}

static void churn_threads(void) {
  pthread_t t;
  int rc = pthread_create(&t, NULL, one_call_thread, NULL);
  if (rc != 0) {
    report_error("churn threads", "pthread_create: %s", strerror(rc));
    return;
  }
  pthread_join(t, NULL);
}

static void* churn_main(void* arg) {
  int kind = (int)(intptr_t)arg;
  void (*const cycle[CHURN_KINDS])(void) = {churn_packages, churn_pools, churn_callbacks,
                                            churn_profiler, churn_usage, churn_threads};
  while (!atomic_load(&g_stop) && atomic_load(&g_errors) <= 100) {
    cycle[kind]();
    atomic_fetch_add(&g_churn_cycles[kind], 1);
    atomic_fetch_add(&g_churn_ops, 1);
  }
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Diagnostics                                                              */
/* ------------------------------------------------------------------------ */

/* Defined in each interpreter of the callers' pool: where its memory is.
 * Nothing here may hold a reference to a live object (gc.get_objects()
 * would): a caller's input tensor would then be released after its call
 * returned, which the callers check never happens. */
static const char kStatsSource[] =
    "def _soak_stats():\n"
    "    import ctypes, linecache, sys\n"
    "    class MallInfo2(ctypes.Structure):\n"
    "        _fields_ = [(n, ctypes.c_size_t) for n in ('arena', 'ordblks', 'smblks', 'hblks',\n"
    "                    'hblkhd', 'usmblks', 'fsmblks', 'uordblks', 'fordblks', 'keepcost')]\n"
    "    libc = ctypes.CDLL('libc.so.6')  # this namespace's libc\n"
    "    libc.mallinfo2.restype = MallInfo2\n"
    "    m = libc.mallinfo2()\n"
    "    return [sys.getallocatedblocks(), len(linecache.cache), len(sys.modules),\n"
    "            (m.arena + m.hblkhd) >> 10, (m.uordblks + m.hblkhd) >> 10, m.fordblks >> 10]\n"
    "def _soak_objects():\n"
    "    import collections, gc\n"
    "    gc.collect()\n"
    "    count = collections.Counter(type(o).__name__ for o in gc.get_objects())\n"
    "    return [sum(count.values())] + [count[n] for n in ('PackageImporter',\n"
    "            'PyTorchFileReader', 'module', 'type', 'function', 'Tensor')]\n";

#define STAT_FIELDS 6
static const char* const kStatNames[STAT_FIELDS] = {"Python blocks",  "linecache entries",
                                                    "sys.modules",    "libc heap kB",
                                                    "libc in use kB", "libc free kB"};
#define OBJECT_FIELDS 7
static const char* const kObjectNames[OBJECT_FIELDS] = {
    "gc objects",     "PackageImporter objects", "PyTorchFileReader objects",
    "module objects", "classes (type objects)",  "functions",
    "Tensors"};

typedef struct snapshot {
  double t;
  mem m;
  long threads;
  struct mallinfo2 host;
  int64_t interp[MAX_INTERPRETERS][STAT_FIELDS];
  int interp_ok;
  smaps_view smaps;
} snapshot;

static void interp_eval_list(int32_t i, const char* expression, int64_t* out, size_t n) {
  manypy_value* v = NULL;
  CHECK(manypy_pool_eval(g_pool, i, expression, &v), expression);
  for (size_t k = 0; k < n; ++k) {
    const manypy_value* item = NULL;
    CHECK(manypy_value_get_item(v, k, &item), "get_item");
    CHECK(manypy_value_get_int64(item, &out[k]), "get_int64");
  }
  manypy_value_free(v);
}

static snapshot take_snapshot(double t0) {
  snapshot s;
  memset(&s, 0, sizeof s);
  s.t = now_s() - t0;
  s.host = mallinfo2();
  for (int i = 0; i < g_opt.interpreters; ++i) {
    interp_eval_list(i, "_soak_stats()", s.interp[i], STAT_FIELDS);
  }
  s.interp_ok = 1;
  s.smaps = read_smaps();
  s.m = read_mem();
  s.threads = process_threads();
  return s;
}

/* Live objects by type, with no call running (gc.get_objects() holds a
 * reference to everything). */
static void print_objects(void) {
  printf("\nLive Python objects at the end (after gc.collect(), no call running):\n");
  for (int i = 0; i < g_opt.interpreters; ++i) {
    int64_t count[OBJECT_FIELDS];
    interp_eval_list(i, "_soak_objects()", count, OBJECT_FIELDS);
    printf("  interpreter %d:", i);
    for (int k = 0; k < OBJECT_FIELDS; ++k) {
      printf("%s %s %lld", k ? "," : "", kObjectNames[k], (long long)count[k]);
    }
    printf("\n");
  }
}

static void print_diagnosis(const snapshot* a, const snapshot* b) {
  printf("\n== Where the memory is: at the baseline (t=%.0f s) and at the end (t=%.0f s) ==\n",
         a->t, b->t);
  printf("%-44s %14s %14s %12s\n", "", "baseline", "end", "change");
  printf("%-44s %14.1f %14.1f %+12.1f\n", "RSS MB", mb(a->m.rss_kb), mb(b->m.rss_kb),
         mb(b->m.rss_kb - a->m.rss_kb));
  printf("%-44s %14ld %14ld %+12ld\n", "threads of the process", a->threads, b->threads,
         b->threads - a->threads);
  long ha = (long)((a->host.arena + a->host.hblkhd) >> 10);
  long hb = (long)((b->host.arena + b->host.hblkhd) >> 10);
  long ua = (long)((a->host.uordblks + a->host.hblkhd) >> 10);
  long ub = (long)((b->host.uordblks + b->host.hblkhd) >> 10);
  printf("%-44s %14ld %14ld %+12ld\n", "host libc malloc: heap kB (arena + mmapped)", ha, hb,
         hb - ha);
  printf("%-44s %14ld %14ld %+12ld\n", "host libc malloc: in use kB", ua, ub, ub - ua);
  printf("%-44s %14ld %14ld %+12ld\n", "host libc malloc: free kB", (long)(a->host.fordblks >> 10),
         (long)(b->host.fordblks >> 10),
         (long)(b->host.fordblks >> 10) - (long)(a->host.fordblks >> 10));
  for (int i = 0; i < g_opt.interpreters && a->interp_ok && b->interp_ok; ++i) {
    for (int k = 0; k < STAT_FIELDS; ++k) {
      char name[64];
      snprintf(name, sizeof name, "interpreter %d: %s", i, kStatNames[k]);
      printf("%-44s %14lld %14lld %+12lld\n", name, (long long)a->interp[i][k],
             (long long)b->interp[i][k], (long long)(b->interp[i][k] - a->interp[i][k]));
    }
  }
  printf("\nMappings (/proc/self/smaps), RSS kB by kind; the kinds that changed most:\n");
  printf("%-56s %10s %10s %10s\n", "kind", "baseline", "end", "change");
  /* Every kind of either snapshot, sorted by |change|. */
  typedef struct row {
    const char* name;
    long before, after;
  } row;
  row* rows = xmalloc((size_t)(a->smaps.n + b->smaps.n) * sizeof *rows);
  int n = 0;
  for (int k = 0; k < b->smaps.n; ++k) {
    rows[n++] =
        (row){b->smaps.g[k].name, group_rss(&a->smaps, b->smaps.g[k].name), b->smaps.g[k].rss_kb};
  }
  for (int k = 0; k < a->smaps.n; ++k) {
    int seen = 0;
    for (int j = 0; j < b->smaps.n && !seen; ++j)
      seen = !strcmp(a->smaps.g[k].name, b->smaps.g[j].name);
    if (!seen) rows[n++] = (row){a->smaps.g[k].name, a->smaps.g[k].rss_kb, 0};
  }
  for (int k = 0; k < n; ++k) { /* selection sort: a few thousand rows at most */
    int best = k;
    for (int j = k + 1; j < n; ++j) {
      if (labs(rows[j].after - rows[j].before) > labs(rows[best].after - rows[best].before)) {
        best = j;
      }
    }
    row tmp = rows[k];
    rows[k] = rows[best];
    rows[best] = tmp;
  }
  for (int k = 0; k < n && k < 12 && rows[k].after != rows[k].before; ++k) {
    printf("%-56.56s %10ld %10ld %+10ld\n", rows[k].name, rows[k].before, rows[k].after,
           rows[k].after - rows[k].before);
  }
  static const char* const kinds[] = {"[heap]", "anon, 64 MiB aligned (malloc arena heaps)",
                                      "anon, other"};
  printf("(totals: ");
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; ++k) {
    printf("%s%s %ld -> %ld", k ? "; " : "", kinds[k], group_rss(&a->smaps, kinds[k]),
           group_rss(&b->smaps, kinds[k]));
  }
  printf(")\n");
  free(rows);
}

/* ------------------------------------------------------------------------ */
/* Sampling and the verdict                                                 */
/* ------------------------------------------------------------------------ */

static atomic_int g_done; /* the run is over: the sampler stops */

typedef struct sampler {
  double t0;
  long total;     /* calls of the run (soak), or 0 (churn: by time) */
  double seconds; /* churn: the run's length */
  pthread_t thread;
} sampler;

/* Progress in [0, 1]. */
static double progress_of(const sampler* s, double t) {
  if (s->total > 0) return (double)atomic_load(&g_calls_done) / (double)s->total;
  return fmin(1.0, t / s->seconds);
}

static void take_sample(const sampler* s) {
  mem m = read_mem();
  double t = now_s() - s->t0;
  curve_add(t, atomic_load(&g_calls_done) + atomic_load(&g_churn_ops), m);
}

static void* sampler_main(void* arg) {
  sampler* s = arg;
  double next_t = g_opt.interval;
  double next_p = g_opt.step / 100.0;
  while (!atomic_load(&g_done)) {
    sleep_s(0.02);
    double t = now_s() - s->t0;
    double p = progress_of(s, t);
    if (t >= next_t || p >= next_p - 1e-12) {
      take_sample(s);
      while (next_t <= t) next_t += g_opt.interval;
      while (next_p <= p + 1e-12) next_p += g_opt.step / 100.0;
    }
  }
  return NULL;
}

typedef struct verdict {
  size_t base;     /* index of the baseline sample */
  double worst;    /* largest |drift| after it, % */
  size_t worst_at; /* index of that sample */
  double end;      /* drift of the last sample, % */
  double slope;    /* least-squares RSS growth after the baseline, bytes per call */
  int ok;
} verdict;

static verdict judge(double warmup_fraction, long total, double seconds) {
  verdict v = {0, 0, 0, 0, 0, 1};
  const sample* s = g_curve.v;
  size_t n = g_curve.n;
  /* The first sample at or after the end of the warm-up (sample 0 is the
   * start, before any call). */
  size_t base = n - 1;
  for (size_t k = 1; k < n; ++k) {
    int warm = total > 0 ? (double)s[k].calls >= warmup_fraction * (double)total - 0.5
                         : s[k].t >= warmup_fraction * seconds - 1e-9;
    if (warm) {
      base = k;
      break;
    }
  }
  v.base = base;
  double b = (double)s[base].m.rss_kb;
  for (size_t k = base; k < n; ++k) {
    double d = 100.0 * ((double)s[k].m.rss_kb - b) / b;
    if (fabs(d) > fabs(v.worst)) {
      v.worst = d;
      v.worst_at = k;
    }
  }
  v.end = 100.0 * ((double)s[n - 1].m.rss_kb - b) / b;
  v.ok = fabs(v.worst) <= g_opt.max_drift;
  /* Growth rate, for information: RSS (bytes) against calls. */
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  size_t m = n - base;
  for (size_t k = base; k < n; ++k) {
    double x = (double)s[k].calls, y = (double)s[k].m.rss_kb * 1024.0;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  double den = (double)m * sxx - sx * sx;
  v.slope = m >= 2 && den > 0 ? ((double)m * sxy - sx * sy) / den : 0;
  return v;
}

static void print_curve(const sampler* s, const verdict* v) {
  printf("\n== Memory over time (MB; calls: %s) ==\n",
         s->total > 0 ? "python_heavy calls done" : "caller calls + churn cycles done");
  printf("%9s %12s %10s %10s %14s %10s %9s\n", "time_s", "calls", "RSS", "Pss", "Private_Dirty",
         "Anonymous", "RSS drift");
  for (size_t k = 0; k < g_curve.n; ++k) {
    const sample* x = &g_curve.v[k];
    char drift[32] = "";
    if (k >= v->base) {
      snprintf(drift, sizeof drift, "%+.2f%%",
               100.0 * (double)(x->m.rss_kb - g_curve.v[v->base].m.rss_kb) /
                   (double)g_curve.v[v->base].m.rss_kb);
    }
    printf("%9.1f %12ld %10.1f %10.1f %14.1f %10.1f %9s%s\n", x->t, x->calls, mb(x->m.rss_kb),
           mb(x->m.pss_kb), mb(x->m.dirty_kb), mb(x->m.anon_kb), drift,
           k == v->base ? "  <- baseline (end of warm-up)" : "");
  }
}

static void write_csv(const char* path) {
  FILE* f = fopen(path, "w");
  if (!f) die("cannot write %s: %s", path, strerror(errno));
  fprintf(f, "time_s,calls,rss_kb,pss_kb,private_dirty_kb,anonymous_kb\n");
  for (size_t k = 0; k < g_curve.n; ++k) {
    const sample* x = &g_curve.v[k];
    fprintf(f, "%.3f,%ld,%ld,%ld,%ld,%ld\n", x->t, x->calls, x->m.rss_kb, x->m.pss_kb,
            x->m.dirty_kb, x->m.anon_kb);
  }
  fclose(f);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  parse_options(argc, argv);
  const int churn = g_opt.churn_seconds > 0;
  const char* mode_name = g_opt.mode == MANYPY_THREAD_MODE_DIRECT ? "DIRECT" : "HANDOFF";

  read_f32("python_heavy.input.bin", g_input, HEAVY_BATCH * HEAVY_WIDTH);
  read_f32("python_heavy.expected.logits.bin", g_logits, HEAVY_BATCH * HEAVY_CLASSES);
  read_f32("python_heavy.expected.norm.bin", g_norm, HEAVY_BATCH);

  if (churn) {
    printf(
        "%s: churn for %.0f s: %d callers of python_heavy on a pool of %d interpreter(s), "
        "%s mode; churning:",
        PROG, g_opt.churn_seconds, g_opt.threads, g_opt.interpreters, mode_name);
    for (int k = 0; k < CHURN_KINDS; ++k) {
      if (g_opt.churn_kinds & (1u << k)) printf(" %s", kChurnNames[k]);
    }
    printf("\n");
  } else {
    printf("%s: %d threads x %ld calls of python_heavy on a pool of %d interpreter(s), %s mode\n",
           PROG, g_opt.threads, g_opt.calls, g_opt.interpreters, mode_name);
  }
  printf(
      "warm-up: the first %.0f%% of the %s; then RSS must stay within +-%.1f%% of its value "
      "at the end of the warm-up\n",
      g_opt.warmup, churn ? "time" : "calls", g_opt.max_drift);

  manypy_pool_options* po = manypy_pool_options_new();
  if (!po) die("out of memory");
  CHECK(manypy_pool_options_set_interpreters(po, (size_t)g_opt.interpreters), "set_interpreters");
  CHECK(manypy_pool_options_set_thread_mode(po, g_opt.mode), "set_thread_mode");
  CHECK(manypy_pool_create(po, &g_pool), "pool_create");
  manypy_pool_options_free(po);
  char path[4096];
  archive_path(path, sizeof path, "python_heavy.pt");
  manypy_package* pkg = NULL;
  CHECK(manypy_package_load_file(g_pool, path, &pkg), "package_load_file python_heavy.pt");
  CHECK(manypy_package_load_pickle(pkg, "model", "model.pkl", &g_model), "load_pickle");
  g_kwargs = heavy_kwargs();
  if (g_opt.diagnose) CHECK(manypy_pool_exec_all(g_pool, kStatsSource), "exec_all stats");

  /* Every interpreter started, with its replica, checked once. */
  {
    float buffer[HEAVY_BATCH * HEAVY_WIDTH];
    memcpy(buffer, g_input, sizeof g_input);
    atomic_long released = 0;
    char why[512];
    for (int i = 0; i < g_opt.interpreters; ++i) {
      manypy_call_options* o = pinned(i);
      if (!heavy_call(g_model, g_kwargs, o, buffer, &released, why, sizeof why)) {
        die("python_heavy on interpreter %d: %s", i, why);
      }
      manypy_call_options_free(o);
    }
  }
  if (churn && (g_opt.churn_kinds & CHURN_POOLS)) {
    /* Start the churn pools' interpreter now, not inside the measured run. */
    manypy_pool* extra = NULL;
    manypy_pool_options* one = manypy_pool_options_new();
    CHECK(manypy_pool_options_set_interpreters(one, 1), "set_interpreters");
    CHECK(manypy_pool_create(one, &extra), "pool_create (the churn pools' interpreter)");
    manypy_pool_options_free(one);
    manypy_pool_destroy(extra);
  }

  const long total = churn ? 0 : (long)g_opt.threads * g_opt.calls;
  sampler smp = {now_s(), total, g_opt.churn_seconds, 0};
  take_sample(&smp); /* the start: interpreters up, nothing called yet but the checks */
  int rc = pthread_create(&smp.thread, NULL, sampler_main, &smp);
  if (rc != 0) die("pthread_create: %s", strerror(rc));

  caller* callers = xmalloc((size_t)g_opt.threads * sizeof *callers);
  for (int t = 0; t < g_opt.threads; ++t) {
    callers[t] = (caller){t, churn ? 0 : g_opt.calls, 0};
    rc = pthread_create(&callers[t].thread, NULL, caller_main, &callers[t]);
    if (rc != 0) die("pthread_create: %s", strerror(rc));
  }
  pthread_t churners[CHURN_KINDS];
  if (churn) {
    for (int k = 0; k < CHURN_KINDS; ++k) {
      if (!(g_opt.churn_kinds & (1u << k))) continue;
      rc = pthread_create(&churners[k], NULL, churn_main, (void*)(intptr_t)k);
      if (rc != 0) die("pthread_create: %s", strerror(rc));
    }
  }

  /* The diagnosis snapshot at the end of the warm-up. */
  const double warm = g_opt.warmup / 100.0;
  snapshot at_base;
  memset(&at_base, 0, sizeof at_base);
  int have_base = 0;
  double last_line = now_s();
  for (;;) {
    sleep_s(0.05);
    double t = now_s() - smp.t0;
    double p = progress_of(&smp, t);
    if (g_opt.diagnose && !have_base && p >= warm) {
      at_base = take_snapshot(smp.t0);
      have_base = 1;
    }
    if (now_s() - last_line >= 30) {
      fprintf(stderr, "[soak] t=%.0f s, %.0f%%, %ld calls, %ld churn cycles, RSS %.1f MB\n", t,
              100 * p, atomic_load(&g_calls_done), atomic_load(&g_churn_ops),
              mb(read_mem().rss_kb));
      last_line = now_s();
    }
    if (churn ? t >= g_opt.churn_seconds : atomic_load(&g_calls_done) >= total) break;
    if (atomic_load(&g_errors) > 100) break;
  }
  atomic_store(&g_stop, 1);
  for (int t = 0; t < g_opt.threads; ++t) pthread_join(callers[t].thread, NULL);
  if (churn) {
    for (int k = 0; k < CHURN_KINDS; ++k) {
      if (g_opt.churn_kinds & (1u << k)) pthread_join(churners[k], NULL);
    }
  }
  double seconds = now_s() - smp.t0;
  atomic_store(&g_done, 1);
  pthread_join(smp.thread, NULL);
  take_sample(&smp); /* the end */

  verdict v = judge(warm, total, g_opt.churn_seconds);
  print_curve(&smp, &v);
  if (g_opt.csv) write_csv(g_opt.csv);
  if (g_opt.diagnose && have_base) {
    snapshot at_end = take_snapshot(smp.t0);
    print_diagnosis(&at_base, &at_end);
    print_objects();
    free(at_end.smaps.g);
    free(at_base.smaps.g);
  }

  const sample* first = &g_curve.v[0];
  const sample* base = &g_curve.v[v.base];
  const sample* last = &g_curve.v[g_curve.n - 1];
  printf("\n== Summary ==\n");
  long calls = atomic_load(&g_calls_done);
  printf("python_heavy calls: %ld verified in %.1f s (%.0f calls/s), %ld errors\n", calls, seconds,
         (double)calls / seconds, atomic_load(&g_errors));
  if (churn) {
    printf("churn cycles:");
    for (int k = 0; k < CHURN_KINDS; ++k) {
      if (g_opt.churn_kinds & (1u << k)) {
        printf(" %s %ld", kChurnNames[k], atomic_load(&g_churn_cycles[k]));
      }
    }
    printf(" (operator events seen: %ld)\n", atomic_load(&g_op_events));
  }
  printf(
      "RSS: start %.1f MB, after warm-up %.1f MB (t=%.0f s, %ld calls), end %.1f MB "
      "(t=%.0f s, %ld calls)\n",
      mb(first->m.rss_kb), mb(base->m.rss_kb), base->t, base->calls, mb(last->m.rss_kb), last->t,
      last->calls);
  printf("Pss: start %.1f, after warm-up %.1f, end %.1f MB; Private_Dirty: %.1f, %.1f, %.1f MB\n",
         mb(first->m.pss_kb), mb(base->m.pss_kb), mb(last->m.pss_kb), mb(first->m.dirty_kb),
         mb(base->m.dirty_kb), mb(last->m.dirty_kb));
  printf(
      "RSS after warm-up: largest drift %+.2f%% (t=%.0f s), at the end %+.2f%%; growth "
      "%.1f bytes per %s (least squares)\n",
      v.worst, g_curve.v[v.worst_at].t, v.end, v.slope, churn ? "call or cycle" : "call");

  long errors = atomic_load(&g_errors);
  if (!churn && calls != total) {
    printf("FAIL: %ld of %ld calls done\n", calls, total);
    return 1;
  }
  if (errors > 0) {
    printf("FAIL: %ld failed or wrong calls\n", errors);
    return 1;
  }
  if (!v.ok) {
    printf("FAIL: RSS drifted %+.2f%% from its value after warm-up (bound +-%.1f%%)\n", v.worst,
           g_opt.max_drift);
    return 2;
  }
  printf("PASS: every call verified; RSS stayed within +-%.1f%% of its value after warm-up\n",
         g_opt.max_drift);
  return 0;
}
