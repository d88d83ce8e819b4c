/*
 * A fuzzer of results (docs/hardening.md, "The result fuzzer"): Python
 * expressions generated from a grammar of values, ordinary and hostile,
 * evaluated in an interpreter, whose results the host converts. Hostile:
 * objects that claim to be tensors, tensor subclasses whose methods empty
 * the containers around them, objects whose __del__ empties them while the
 * result is freed, str keys with an __eq__ of their own, self-referential and
 * too deep containers, tensors torch cannot export (sparse, quantized,
 * conjugated), strings that are not UTF-8, integers past int64.
 *
 * Every result must come back as a value, read whole (every tensor byte),
 * or as a status other than MANYPY_ERR_INTERNAL; and the grammar knows which
 * expressions are representable, so a representable one must succeed with
 * the right kind and an unrepresentable one must fail. A crash fails the
 * run. MANYPY_RESULT_FUZZ_SEED and MANYPY_RESULT_FUZZ_COUNT choose the seed
 * (default 1) and the number of expressions (default 10000); the seed is
 * printed, so a failure can be replayed.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

/* Definitions the expressions use, run once in the interpreter. */
static const char kPrelude[] =
    "import collections, torch\n"
    "VICTIMS = []\n"
    "def victim(x):\n"
    "    VICTIMS.append(x)\n"
    "    return x\n"
    "def clear_victims():\n"
    "    for v in VICTIMS:\n"
    "        v.clear()\n"
    "class Fake:\n"
    "    @property\n"
    "    def __class__(self):\n"
    "        clear_victims()\n"
    "        return torch.Tensor\n"
    "class Sub(torch.Tensor):\n"
    "    pass\n"
    "class Clearing(torch.Tensor):\n"
    "    @classmethod\n"
    "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
    "        clear_victims()\n"
    "        return super().__torch_function__(func, types, args, kwargs or {})\n"
    "class Del:\n"
    "    def __del__(self):\n"
    "        clear_victims()\n"
    "class Key(str):\n"
    "    __hash__ = str.__hash__\n"
    "    def __eq__(self, other):\n"
    "        clear_victims()\n"
    "        return str.__eq__(self, other)\n"
    "class Items(list):\n"
    "    def __getitem__(self, i):\n"
    "        clear_victims()\n"
    "        return list.__getitem__(self, i)\n"
    "    def __len__(self):\n"
    "        return 1000\n"
    "Pair = collections.namedtuple('Pair', 'a b')\n"
    "def selfref():\n"
    "    x = [1]\n"
    "    x.append(x)\n"
    "    return x\n"
    "def deep(n, leaf):\n"
    "    for _ in range(n):\n"
    "        leaf = [leaf]\n"
    "    return leaf\n";

static uint64_t g_state;

static uint64_t next_random(void) {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}

static unsigned pick(unsigned n) { return (unsigned)(next_random() % n); }

typedef struct {
  char text[8192];
  size_t len;
} expr;

static void append(expr* e, const char* s) {
  size_t n = strlen(s);
  if (e->len + n + 1 < sizeof e->text) {
    memcpy(e->text + e->len, s, n + 1);
    e->len += n;
  }
}

/* A leaf: its source, and whether the host can represent it. */
typedef struct {
  const char* source;
  int representable;
} leaf;

static const leaf kLeaves[] = {
    {"None", 1},
    {"True", 1},
    {"-7", 1},
    {"2**63 - 1", 1},
    {"2**63", 0},
    {"-2**63 - 1", 0},
    {"float('nan')", 1},
    {"-float('inf')", 1},
    {"'text \\u00e9\\u2603'", 1},
    {"''", 1},
    {"'\\ud800'", 0},
    {"b'\\x00\\xff'", 1},
    {"bytearray(b'ab')", 1},
    {"torch.ones(3)", 1},
    {"torch.tensor(2.5)", 1},
    {"torch.empty(0, 4)", 1},
    {"torch.ones(2, 3, dtype=torch.bool)", 1},
    {"torch.arange(6, dtype=torch.int64).reshape(2, 3).t()", 1},
    {"torch.arange(10.)[::3]", 1},
    {"torch.ones(2, dtype=torch.float16)", 1},
    {"torch.ones(2, dtype=torch.bfloat16)", 1},
    {"torch.ones(2, dtype=torch.complex64)", 1},
    {"torch.ones(2, dtype=torch.uint8)", 1},
    {"torch.nn.Parameter(torch.ones(2))", 1},
    {"torch.ones(2, requires_grad=True)", 1},
    {"torch.tensor([1+2j]).conj()", 1},
    {"torch.tensor([1+2j]).conj().imag", 1},
    {"torch.ones(2).to_sparse()", 0},
    {"torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.quint8)", 0},
    {"torch.ones(2).as_subclass(Sub)", 0},
    {"torch.ones(2, dtype=torch.bool).as_subclass(Clearing)", 0},
    {"Fake()", 0},
    {"Del()", 0},
    {"object()", 0},
    {"selfref()", 0},
    {"deep(70, 1)", 0},
    {"deep(10, torch.ones(1))", 1},
};
#define LEAVES (sizeof kLeaves / sizeof kLeaves[0])

/* Appends a value of at most `depth` more containers; returns whether it is
 * representable, and its kind through *kind. */
static int generate(expr* e, int depth, manypy_value_kind* kind) {
  unsigned choice = depth > 0 ? pick(10) : 0;
  if (choice < 4) {
    const leaf* l = &kLeaves[pick(LEAVES)];
    append(e, l->source);
    *kind = (manypy_value_kind)-1; /* a leaf: not checked */
    return l->representable;
  }
  static const char* const kOpen[] = {
      "[", "(", "victim([", "Items([", "Pair(", "{", "collections.OrderedDict(", "{1: "};
  static const char* const kClose[] = {"]", ",)", "])", "])", ")", "}", ")", "}"};
  unsigned form = pick(8);
  int ok = 1;
  manypy_value_kind inner;
  append(e, kOpen[form]);
  /* A pair has 2 items, an int-keyed dict 1, a tuple literal 1 or more
   * ("(,)" does not parse), the rest 0 to 3. */
  unsigned n = form == 4 ? 2 : form == 7 ? 1 : form == 1 ? 1 + pick(3) : pick(4);
  for (unsigned k = 0; k < n; ++k) {
    if (form == 5) {
      char key[32];
      snprintf(key, sizeof key, pick(4) == 0 ? "Key('k%u'): " : "'k%u': ", k);
      append(e, key);
    }
    if (form == 6) {
      char key[8];
      snprintf(key, sizeof key, "k%u=", k);
      append(e, key);
    }
    ok &= generate(e, depth - 1, &inner);
    if (k + 1 < n) append(e, ", ");
  }
  append(e, kClose[form]);
  if (form == 7) ok = 0; /* an int key */
  *kind = form == 1 || form == 4 ? MANYPY_VALUE_TUPLE
          : form >= 5            ? MANYPY_VALUE_DICT
                                 : MANYPY_VALUE_LIST;
  return ok;
}

/* Reads every byte of every tensor in `value`: a view that dangles or lies
 * about its size shows as a crash (or a sanitizer report). */
static uint64_t touch(const manypy_value* value) {
  uint64_t sum = 0;
  if (manypy_value_get_kind(value) == MANYPY_VALUE_TENSOR) {
    DLManagedTensor* t = NULL;
    ASSERT_OK(manypy_value_get_tensor(value, &t));
    const DLTensor* d = &t->dl_tensor;
    int64_t n = capi_numel(d);
    size_t size = (size_t)(d->dtype.bits / 8) * d->dtype.lanes;
    for (int64_t k = 0; k < n; ++k) {
      const unsigned char* p = capi_element(d, k);
      for (size_t b = 0; b < size; ++b) sum += p[b];
    }
    t->deleter(t);
    return sum;
  }
  /* Only lists and tuples have items; any other kind refuses with a status,
   * which is the caller's to free. */
  size_t count = 0;
  manypy_status* not_a_sequence = manypy_value_length(value, &count);
  if (not_a_sequence != NULL) {
    manypy_status_free(not_a_sequence);
    return sum;
  }
  for (size_t k = 0; k < count; ++k) {
    const manypy_value* item = NULL;
    ASSERT_OK(manypy_value_get_item(value, k, &item));
    sum += touch(item);
  }
  return sum;
}

static void test_generated_results(void** state) {
  manypy_pool* pool = *state;
  const char* seed_text = getenv("MANYPY_RESULT_FUZZ_SEED");
  const char* count_text = getenv("MANYPY_RESULT_FUZZ_COUNT");
  uint64_t seed = seed_text ? strtoull(seed_text, NULL, 10) : 1;
  long count = count_text ? strtol(count_text, NULL, 10) : 10000;
  g_state = seed * 0x9E3779B97F4A7C15ull | 1;
  print_message("seed %" PRIu64 ", %ld expressions\n", seed, count);
  long ok = 0, refused = 0;
  for (long i = 0; i < count; ++i) {
    expr e = {{0}, 0};
    manypy_value_kind kind;
    int representable = generate(&e, 1 + (int)pick(4), &kind);
    manypy_value* out = NULL;
    manypy_status* s = manypy_pool_eval(pool, 0, e.text, &out);
    if (s == NULL) {
      ++ok;
      if (!representable) fail_msg("expression %ld was converted but cannot be: %s", i, e.text);
      if ((int)kind >= 0 && manypy_value_get_kind(out) != kind) {
        fail_msg("expression %ld: kind %d, expected %d: %s", i, manypy_value_get_kind(out), kind,
                 e.text);
      }
      (void)touch(out);
      manypy_value_free(out);
      continue;
    }
    ++refused;
    manypy_code code = manypy_status_code(s);
    if (code == MANYPY_ERR_INTERNAL || representable) {
      fail_msg("expression %ld failed with %s: %s\n  %s", i, manypy_code_name(code),
               manypy_status_message(s), e.text);
    }
    manypy_status_free(s);
    ASSERT_OK(manypy_pool_exec(pool, 0, "VICTIMS.clear()"));
  }
  print_message("%ld converted, %ld refused with a status\n", ok, refused);
  assert_true(ok > count / 10 && refused > count / 10); /* the grammar reaches both */
}

static capi_fixture g;

static int setup(void** state) {
  if (capi_fixture_setup(&g, 1, MANYPY_THREAD_MODE_DIRECT, NULL) != 0) return -1;
  manypy_status* s = manypy_pool_exec(g.pool, 0, kPrelude);
  if (s != NULL) {
    capi_print_status("the prelude", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  *state = g.pool;
  return 0;
}

static int teardown(void** state) {
  (void)state;
  capi_fixture_teardown(&g);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_generated_results, setup, teardown),
  };
  return cmocka_run_group_tests_name("capi_fuzz_results", tests, NULL, NULL);
}
