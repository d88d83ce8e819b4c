/*
 * Values: builders, accessors, ownership on failure, NULL arguments (no
 * interpreter), then round trips of every kind through identity.pt and
 * container results of manypy_pool_eval (one interpreter).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"

#define SENTINEL_VALUE ((manypy_value*)(uintptr_t)0x7a7a7a7a)
#define SENTINEL_CVALUE ((const manypy_value*)(uintptr_t)0x7b7b7b7b)
#define SENTINEL_STR ((const char*)(uintptr_t)0x3c3c3c3c)

static const DLDataType kF32 = {kDLFloat, 32, 1};

/* A counted 2-element float32 tensor value over static data; *deleted counts
 * deleter calls. */
static float g_pair[2] = {1.5f, -2.5f};
static manypy_value* counted_pair(atomic_int* deleted) {
  const int64_t shape[1] = {2};
  DLManagedTensor* t = capi_counted_tensor(g_pair, kF32, 1, shape, NULL, deleted);
  assert_non_null(t);
  manypy_value* v = NULL;
  ASSERT_OK(manypy_value_new_tensor(t, &v));
  return v;
}

static int64_t get_int(const manypy_value* v) {
  int64_t out = 0;
  ASSERT_OK(manypy_value_get_int64(v, &out));
  return out;
}

static const manypy_value* item_at(const manypy_value* v, size_t index) {
  const manypy_value* item = NULL;
  ASSERT_OK(manypy_value_get_item(v, index, &item));
  assert_non_null(item);
  return item;
}

static size_t length_of(const manypy_value* v) {
  size_t n = 9999;
  ASSERT_OK(manypy_value_length(v, &n));
  return n;
}

/* ---- builders and accessors (no interpreter) -------------------------------- */

static void test_scalar_builders(void** state) {
  (void)state;
  manypy_value* none = manypy_value_new_none();
  manypy_value* yes = manypy_value_new_bool(7); /* any non-zero is true */
  manypy_value* no = manypy_value_new_bool(0);
  manypy_value* lo = manypy_value_new_int64(INT64_MIN);
  manypy_value* hi = manypy_value_new_int64(INT64_MAX);
  manypy_value* dbl = manypy_value_new_double(-0.0);
  manypy_value* inf = manypy_value_new_double(INFINITY);
  assert_non_null(none);
  assert_int_equal(manypy_value_get_kind(none), MANYPY_VALUE_NONE);
  assert_int_equal(manypy_value_get_kind(yes), MANYPY_VALUE_BOOL);
  assert_int_equal(manypy_value_get_kind(lo), MANYPY_VALUE_INT64);
  assert_int_equal(manypy_value_get_kind(dbl), MANYPY_VALUE_DOUBLE);
  int b = -1;
  ASSERT_OK(manypy_value_get_bool(yes, &b));
  assert_int_equal(b, 1);
  ASSERT_OK(manypy_value_get_bool(no, &b));
  assert_int_equal(b, 0);
  assert_true(get_int(lo) == INT64_MIN);
  assert_true(get_int(hi) == INT64_MAX);
  double d = 1;
  ASSERT_OK(manypy_value_get_double(dbl, &d));
  assert_true(d == 0.0 && signbit(d));
  ASSERT_OK(manypy_value_get_double(inf, &d));
  assert_true(isinf(d) && d > 0);
  manypy_value* values[] = {none, yes, no, lo, hi, dbl, inf};
  for (size_t k = 0; k < sizeof values / sizeof values[0]; ++k) manypy_value_free(values[k]);
}

static void test_bytes_and_strings(void** state) {
  (void)state;
  const char raw[] = {'a', 0, (char)0xff, 'z'};
  manypy_value* bytes = manypy_value_new_bytes(raw, sizeof raw);
  assert_non_null(bytes);
  assert_int_equal(manypy_value_get_kind(bytes), MANYPY_VALUE_BYTES);
  const void* data = NULL;
  size_t n = 0;
  ASSERT_OK(manypy_value_get_bytes(bytes, &data, &n));
  assert_int_equal(n, 4);
  assert_memory_equal(data, raw, 4);
  assert_true(data != (const void*)raw); /* copied */
  manypy_value_free(bytes);

  manypy_value* empty = manypy_value_new_bytes(NULL, 0);
  assert_non_null(empty);
  ASSERT_OK(manypy_value_get_bytes(empty, &data, &n));
  assert_int_equal(n, 0);
  manypy_value_free(empty);

  /* A string with NUL and non-ASCII: "a\0b é 😀". */
  const char text[] = "a\0b \xc3\xa9 \xf0\x9f\x98\x80";
  manypy_value* s = NULL;
  ASSERT_OK(manypy_value_new_string(text, sizeof text - 1, &s));
  assert_int_equal(manypy_value_get_kind(s), MANYPY_VALUE_STRING);
  const char* utf8 = NULL;
  ASSERT_OK(manypy_value_get_string(s, &utf8, &n));
  assert_int_equal(n, sizeof text - 1);
  assert_memory_equal(utf8, text, sizeof text); /* NUL-terminated too */
  assert_true(utf8 != text);
  /* out_length may be NULL. */
  utf8 = NULL;
  ASSERT_OK(manypy_value_get_string(s, &utf8, NULL));
  assert_string_equal(utf8, "a");
  manypy_value_free(s);

  /* The empty string, from NULL and from "". */
  ASSERT_OK(manypy_value_new_string(NULL, 0, &s));
  ASSERT_OK(manypy_value_get_string(s, &utf8, &n));
  assert_int_equal(n, 0);
  assert_string_equal(utf8, "");
  manypy_value_free(s);
}

/* Returns NULL if new_string refused the bytes as it should, else a
 * description of what it did instead (static storage). */
static const char* bad_utf8_problem(const char* bytes, size_t length) {
  static char problem[256];
  manypy_value* v = SENTINEL_VALUE;
  manypy_status* s = manypy_value_new_string(bytes, length, &v);
  if (s == NULL) {
    manypy_value_free(v);
    return "accepted";
  }
  problem[0] = '\0';
  if (manypy_status_code(s) != MANYPY_ERR_INVALID_ARGUMENT) {
    snprintf(problem, sizeof problem, "%s, not MANYPY_ERR_INVALID_ARGUMENT",
             manypy_code_name(manypy_status_code(s)));
  } else if (strstr(manypy_status_message(s), "manypy_value_new_string") == NULL ||
             strstr(manypy_status_message(s), "UTF-8") == NULL) {
    snprintf(problem, sizeof problem, "message without the function or 'UTF-8': %s",
             manypy_status_message(s));
  } else if (v != SENTINEL_VALUE) {
    snprintf(problem, sizeof problem, "out_value written on failure");
  }
  manypy_status_free(s);
  return problem[0] ? problem : NULL;
}

struct bad_utf8 {
  const char* bytes;
  size_t length;
  const char* what;
};

/* Checks every case and fails once, listing each case handled wrongly. */
static void check_bad_utf8_cases(const struct bad_utf8* cases, size_t count) {
  char report[2048] = "";
  size_t failures = 0;
  for (size_t k = 0; k < count; ++k) {
    const char* problem = bad_utf8_problem(cases[k].bytes, cases[k].length);
    if (problem != NULL) {
      ++failures;
      size_t used = strlen(report);
      snprintf(report + used, sizeof report - used, "\n  %s: %s", cases[k].what, problem);
    }
  }
  if (failures > 0) {
    fail_msg("manypy_value_new_string mishandled %zu of %zu invalid UTF-8 inputs:%s", failures,
             count, report);
  }
}

/* Byte sequences no UTF-8 decoder reads as one character. */
static void test_invalid_utf8_structure(void** state) {
  (void)state;
  const struct bad_utf8 cases[] = {
      {"\xff", 1, "0xff"},
      {"abc\x80", 4, "a lone continuation byte"},
      {"\xc3", 1, "a truncated 2-byte sequence"},
      {"ok\xe2\x82", 4, "a truncated 3-byte sequence"},
      {"\xc3(", 2, "a lead byte followed by ASCII"},
      {"\xf8\x88\x80\x80\x80", 5, "a 5-byte sequence"},
      /* NUL inside is fine, and does not end the check early. */
      {"a\0\xff", 3, "0xff after an embedded NUL"},
  };
  check_bad_utf8_cases(cases, sizeof cases / sizeof cases[0]);
}

/* Well-formed-looking sequences that are still not UTF-8 (RFC 3629):
 * overlong encodings, UTF-16 surrogates, code points above U+10FFFF. The
 * header promises MANYPY_ERR_INVALID_ARGUMENT for any invalid UTF-8. */
static void test_invalid_utf8_overlong_surrogate_range(void** state) {
  (void)state;
  const struct bad_utf8 cases[] = {
      {"\xc0\xaf", 2, "the overlong encoding of '/' (C0 AF)"},
      {"\xe0\x80\xaf", 3, "a 3-byte overlong encoding (E0 80 AF)"},
      {"\xed\xa0\x80", 3, "the surrogate U+D800 (ED A0 80)"},
      {"\xf4\x90\x80\x80", 4, "U+110000 (F4 90 80 80)"},
      {"\xf5\x80\x80\x80", 4, "lead byte F5"},
  };
  check_bad_utf8_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_list_and_tuple(void** state) {
  (void)state;
  manypy_value* items[] = {manypy_value_new_int64(10), STRING("two"), manypy_value_new_double(3.5)};
  manypy_value* list = LIST_OF(3, items);
  assert_int_equal(manypy_value_get_kind(list), MANYPY_VALUE_LIST);
  assert_int_equal(length_of(list), 3);
  assert_int_equal(get_int(item_at(list, 0)), 10);
  const char* s = NULL;
  ASSERT_OK(manypy_value_get_string(item_at(list, 1), &s, NULL));
  assert_string_equal(s, "two");
  double d = 0;
  ASSERT_OK(manypy_value_get_double(item_at(list, 2), &d));
  assert_true(d == 3.5);
  /* Borrowed items are stable: the same pointer each time. */
  assert_ptr_equal(item_at(list, 1), item_at(list, 1));

  const manypy_value* item = SENTINEL_CVALUE;
  manypy_status* st = EXPECT_CODE(manypy_value_get_item(list, 3, &item), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(st), "manypy_value_get_item");
  ASSERT_CONTAINS(manypy_status_message(st), "index 3");
  ASSERT_CONTAINS(manypy_status_message(st), "length 3");
  manypy_status_free(st);
  ASSERT_CODE(manypy_value_get_item(list, SIZE_MAX, &item), MANYPY_ERR_OUT_OF_RANGE);
  assert_ptr_equal(item, SENTINEL_CVALUE);
  manypy_value_free(list);

  manypy_value* tuple = manypy_value_new_tuple();
  assert_int_equal(manypy_value_get_kind(tuple), MANYPY_VALUE_TUPLE);
  assert_int_equal(length_of(tuple), 0);
  ASSERT_CODE(manypy_value_get_item(tuple, 0, &item), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_OK(manypy_value_append(tuple, manypy_value_new_none()));
  ASSERT_OK(manypy_value_append(tuple, manypy_value_new_bool(1)));
  assert_int_equal(length_of(tuple), 2);
  assert_int_equal(manypy_value_get_kind(item_at(tuple, 0)), MANYPY_VALUE_NONE);
  assert_int_equal(manypy_value_get_kind(item_at(tuple, 1)), MANYPY_VALUE_BOOL);
  manypy_value_free(tuple);
}

static void test_dict(void** state) {
  (void)state;
  manypy_value* dict = manypy_value_new_dict();
  assert_int_equal(manypy_value_get_kind(dict), MANYPY_VALUE_DICT);
  assert_int_equal(length_of(dict), 0);
  ASSERT_OK(manypy_value_dict_set(dict, "zeta", manypy_value_new_int64(1)));
  ASSERT_OK(manypy_value_dict_set(dict, "alpha", STRING("x")));
  ASSERT_OK(manypy_value_dict_set(dict, "h\xc3\xa9", manypy_value_new_none()));
  /* Replacing keeps the key's place and the length. */
  ASSERT_OK(manypy_value_dict_set(dict, "zeta", manypy_value_new_int64(2)));
  assert_int_equal(length_of(dict), 3);
  const char* key = NULL;
  ASSERT_OK(manypy_value_dict_key(dict, 0, &key, NULL));
  assert_string_equal(key, "zeta");
  ASSERT_OK(manypy_value_dict_key(dict, 1, &key, NULL));
  assert_string_equal(key, "alpha");
  ASSERT_OK(manypy_value_dict_key(dict, 2, &key, NULL));
  assert_string_equal(key, "h\xc3\xa9");
  const manypy_value* v = NULL;
  ASSERT_OK(manypy_value_dict_get(dict, "zeta", &v));
  assert_int_equal(get_int(v), 2);
  /* get_item on a dict gives the index-th value. */
  assert_ptr_equal(item_at(dict, 0), v);
  assert_int_equal(manypy_value_get_kind(item_at(dict, 2)), MANYPY_VALUE_NONE);

  v = SENTINEL_CVALUE;
  manypy_status* s =
      EXPECT_CODE(manypy_value_dict_get(dict, "missing", &v), MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_dict_get");
  ASSERT_CONTAINS(manypy_status_message(s), "'missing'");
  manypy_status_free(s);
  assert_ptr_equal(v, SENTINEL_CVALUE);
  /* Keys are exact: no prefix or case folding. */
  ASSERT_CODE(manypy_value_dict_get(dict, "Zeta", &v), MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CODE(manypy_value_dict_get(dict, "zet", &v), MANYPY_ERR_NO_SUCH_NAME);

  key = SENTINEL_STR;
  s = EXPECT_CODE(manypy_value_dict_key(dict, 3, &key, NULL), MANYPY_ERR_OUT_OF_RANGE);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_dict_key");
  ASSERT_CONTAINS(manypy_status_message(s), "index 3");
  manypy_status_free(s);
  assert_ptr_equal(key, SENTINEL_STR);
  ASSERT_CODE(manypy_value_get_item(dict, 3, &v), MANYPY_ERR_OUT_OF_RANGE);

  /* Invalid UTF-8 key: refused, the dict unchanged. */
  s = EXPECT_CODE(manypy_value_dict_set(dict, "bad\xff", manypy_value_new_int64(5)),
                  MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_dict_set");
  ASSERT_CONTAINS(manypy_status_message(s), "UTF-8");
  manypy_status_free(s);
  assert_int_equal(length_of(dict), 3);
  manypy_value_free(dict);
}

static void test_nested_containers(void** state) {
  (void)state;
  /* [ {"inner": (1, [2.5, None])}, b"\0" ] */
  manypy_value* inner_list = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(inner_list, manypy_value_new_double(2.5)));
  ASSERT_OK(manypy_value_append(inner_list, manypy_value_new_none()));
  manypy_value* tuple = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(tuple, manypy_value_new_int64(1)));
  ASSERT_OK(manypy_value_append(tuple, inner_list));
  manypy_value* dict = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(dict, "inner", tuple));
  manypy_value* outer = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(outer, dict));
  ASSERT_OK(manypy_value_append(outer, manypy_value_new_bytes("\0", 1)));

  assert_int_equal(length_of(outer), 2);
  const manypy_value* d = item_at(outer, 0);
  assert_int_equal(manypy_value_get_kind(d), MANYPY_VALUE_DICT);
  const manypy_value* t = NULL;
  ASSERT_OK(manypy_value_dict_get(d, "inner", &t));
  assert_int_equal(manypy_value_get_kind(t), MANYPY_VALUE_TUPLE);
  assert_int_equal(length_of(t), 2);
  assert_int_equal(get_int(item_at(t, 0)), 1);
  const manypy_value* l = item_at(t, 1);
  assert_int_equal(manypy_value_get_kind(l), MANYPY_VALUE_LIST);
  double x = 0;
  ASSERT_OK(manypy_value_get_double(item_at(l, 0), &x));
  assert_true(x == 2.5);
  assert_int_equal(manypy_value_get_kind(item_at(l, 1)), MANYPY_VALUE_NONE);
  const void* data = NULL;
  size_t n = 0;
  ASSERT_OK(manypy_value_get_bytes(item_at(outer, 1), &data, &n));
  assert_int_equal(n, 1);
  assert_int_equal(((const char*)data)[0], 0);
  /* Frees the whole tree. */
  manypy_value_free(outer);
}

static void test_wrong_kinds(void** state) {
  (void)state;
  manypy_value* num = manypy_value_new_int64(3);
  manypy_value* str = STRING("s");
  manypy_value* bytes = manypy_value_new_bytes("b", 1);
  manypy_value* list = manypy_value_new_list();
  manypy_value* dict = manypy_value_new_dict();
  size_t n = 77;
  const manypy_value* item = SENTINEL_CVALUE;
  const char* key = SENTINEL_STR;
  const void* data = NULL;
  DLManagedTensor* tensor = NULL;

  manypy_status* s = EXPECT_CODE(manypy_value_length(num, &n), MANYPY_ERR_WRONG_KIND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_length");
  ASSERT_CONTAINS(manypy_status_message(s), "int64");
  manypy_status_free(s);
  ASSERT_CODE(manypy_value_length(str, &n), MANYPY_ERR_WRONG_KIND);
  assert_int_equal(n, 77);
  s = EXPECT_CODE(manypy_value_get_item(str, 0, &item), MANYPY_ERR_WRONG_KIND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_get_item");
  manypy_status_free(s);
  assert_ptr_equal(item, SENTINEL_CVALUE);
  s = EXPECT_CODE(manypy_value_dict_key(list, 0, &key, NULL), MANYPY_ERR_WRONG_KIND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_dict_key");
  manypy_status_free(s);
  assert_ptr_equal(key, SENTINEL_STR);
  s = EXPECT_CODE(manypy_value_dict_get(list, "k", &item), MANYPY_ERR_WRONG_KIND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_dict_get");
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_value_get_bytes(str, &data, &n), MANYPY_ERR_WRONG_KIND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_get_bytes");
  manypy_status_free(s);
  const char* text = SENTINEL_STR;
  ASSERT_CODE(manypy_value_get_string(bytes, &text, &n), MANYPY_ERR_WRONG_KIND);
  assert_ptr_equal(text, SENTINEL_STR);
  s = EXPECT_CODE(manypy_value_get_tensor(num, &tensor), MANYPY_ERR_WRONG_KIND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_get_tensor");
  manypy_status_free(s);
  assert_null(tensor);
  int64_t i = 5;
  ASSERT_CODE(manypy_value_get_int64(list, &i), MANYPY_ERR_WRONG_KIND);
  assert_int_equal(i, 5);
  /* Building into the wrong kind. */
  s = EXPECT_CODE(manypy_value_append(dict, manypy_value_new_none()), MANYPY_ERR_WRONG_KIND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_append");
  manypy_status_free(s);
  s = EXPECT_CODE(manypy_value_dict_set(list, "k", manypy_value_new_none()), MANYPY_ERR_WRONG_KIND);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_dict_set");
  manypy_status_free(s);
  assert_int_equal(length_of(list), 0);
  assert_int_equal(length_of(dict), 0);

  manypy_value* all[] = {num, str, bytes, list, dict};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; ++k) manypy_value_free(all[k]);
}

/* append and dict_set own `item` whatever happens: a failing call frees it.
 * The item is a counted tensor, so "freed" is observable. */
static void test_append_and_dict_set_own_item_on_failure(void** state) {
  (void)state;
  atomic_int deleted = 0;
  manypy_value* num = manypy_value_new_int64(1);
  manypy_value* list = manypy_value_new_list();
  manypy_value* dict = manypy_value_new_dict();

  ASSERT_CODE(manypy_value_append(num, counted_pair(&deleted)), MANYPY_ERR_WRONG_KIND);
  assert_int_equal(atomic_load(&deleted), 1);
  ASSERT_CODE(manypy_value_append(NULL, counted_pair(&deleted)), MANYPY_ERR_INVALID_ARGUMENT);
  assert_int_equal(atomic_load(&deleted), 2);
  ASSERT_CODE(manypy_value_dict_set(list, "k", counted_pair(&deleted)), MANYPY_ERR_WRONG_KIND);
  assert_int_equal(atomic_load(&deleted), 3);
  ASSERT_CODE(manypy_value_dict_set(dict, NULL, counted_pair(&deleted)),
              MANYPY_ERR_INVALID_ARGUMENT);
  assert_int_equal(atomic_load(&deleted), 4);
  ASSERT_CODE(manypy_value_dict_set(NULL, "k", counted_pair(&deleted)),
              MANYPY_ERR_INVALID_ARGUMENT);
  assert_int_equal(atomic_load(&deleted), 5);
  ASSERT_CODE(manypy_value_dict_set(dict, "\xc3", counted_pair(&deleted)),
              MANYPY_ERR_INVALID_ARGUMENT);
  assert_int_equal(atomic_load(&deleted), 6);
  /* The same for dict_set_n. */
  ASSERT_CODE(manypy_value_dict_set_n(list, "k", 1, counted_pair(&deleted)), MANYPY_ERR_WRONG_KIND);
  ASSERT_CODE(manypy_value_dict_set_n(dict, NULL, 1, counted_pair(&deleted)),
              MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CODE(manypy_value_dict_set_n(NULL, "k", 1, counted_pair(&deleted)),
              MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CODE(manypy_value_dict_set_n(dict, "k\0\xc3", 3, counted_pair(&deleted)),
              MANYPY_ERR_INVALID_ARGUMENT);
  assert_int_equal(atomic_load(&deleted), 10);
  assert_int_equal(length_of(dict), 0);

  /* On success the container owns it: freed with the container, once. */
  ASSERT_OK(manypy_value_append(list, counted_pair(&deleted)));
  ASSERT_OK(manypy_value_dict_set(dict, "k", counted_pair(&deleted)));
  /* Replacing a key frees the old item. */
  ASSERT_OK(manypy_value_dict_set(dict, "k", counted_pair(&deleted)));
  assert_int_equal(atomic_load(&deleted), 11);
  manypy_value_free(list);
  assert_int_equal(atomic_load(&deleted), 12);
  manypy_value_free(dict);
  assert_int_equal(atomic_load(&deleted), 13);
  manypy_value_free(num);
}

static void test_value_cannot_contain_itself(void** state) {
  (void)state;
  manypy_value* list = manypy_value_new_list();
  manypy_status* s = EXPECT_CODE(manypy_value_append(list, list), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_append");
  manypy_status_free(s);
  manypy_value* dict = manypy_value_new_dict();
  s = EXPECT_CODE(manypy_value_dict_set(dict, "self", dict), MANYPY_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_dict_set");
  manypy_status_free(s);
  /* Both survived (they could not have been freed: the caller still owns them). */
  assert_int_equal(length_of(list), 0);
  assert_int_equal(length_of(dict), 0);
  manypy_value_free(list);
  manypy_value_free(dict);
}

/* Keys with explicit lengths: NUL inside a key is part of it, NULL with
 * length 0 is the empty key, and lookups by either form agree. */
static void test_dict_set_n_and_get_n(void** state) {
  (void)state;
  manypy_value* d = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set_n(d, "a\0b", 3, manypy_value_new_int64(1)));
  ASSERT_OK(manypy_value_dict_set_n(d, "a", 1, manypy_value_new_int64(2)));
  ASSERT_OK(manypy_value_dict_set_n(d, NULL, 0, manypy_value_new_int64(3)));
  ASSERT_OK(manypy_value_dict_set_n(d, "ignored", 0, manypy_value_new_int64(4))); /* "" again */
  assert_int_equal(length_of(d), 3);
  const manypy_value* item = NULL;
  ASSERT_OK(manypy_value_dict_get_n(d, "a\0b", 3, &item));
  assert_int_equal(get_int(item), 1);
  ASSERT_OK(manypy_value_dict_get_n(d, "a", 1, &item));
  assert_int_equal(get_int(item), 2);
  ASSERT_OK(manypy_value_dict_get(d, "a", &item)); /* strlen: the same key */
  assert_int_equal(get_int(item), 2);
  ASSERT_OK(manypy_value_dict_get_n(d, NULL, 0, &item));
  assert_int_equal(get_int(item), 4);
  ASSERT_OK(manypy_value_dict_get(d, "", &item));
  assert_int_equal(get_int(item), 4);
  const char* key = NULL;
  size_t key_length = 0;
  ASSERT_OK(manypy_value_dict_key(d, 0, &key, &key_length));
  assert_int_equal(key_length, 3);
  assert_memory_equal(key, "a\0b", 4);
  /* Replacing keeps the place and the count. */
  ASSERT_OK(manypy_value_dict_set_n(d, "a\0b", 3, manypy_value_new_int64(5)));
  assert_int_equal(length_of(d), 3);
  assert_int_equal(get_int(item_at(d, 0)), 5);
  /* A missing key is named with its NUL visible. */
  const manypy_value* untouched = SENTINEL_CVALUE;
  manypy_status* s =
      EXPECT_CODE(manypy_value_dict_get_n(d, "a\0c", 3, &untouched), MANYPY_ERR_NO_SUCH_NAME);
  ASSERT_CONTAINS(manypy_status_message(s), "manypy_value_dict_get_n");
  ASSERT_CONTAINS(manypy_status_message(s), "'a\\x00c'");
  manypy_status_free(s);
  ASSERT_CODE(manypy_value_dict_get_n(d, "a\0", 2, &untouched), MANYPY_ERR_NO_SUCH_NAME);
  assert_ptr_equal(untouched, SENTINEL_CVALUE);
  /* UTF-8 is checked over the whole length, past the NUL too. */
  ASSERT_INVALID_ARG(manypy_value_dict_get_n(d, "a\0\xff", 3, &untouched),
                     "manypy_value_dict_get_n", "key");
  ASSERT_INVALID_ARG(manypy_value_dict_set_n(d, "a\0\xed\xa0\x80", 5, manypy_value_new_none()),
                     "manypy_value_dict_set_n", "key");
  manypy_value* list = manypy_value_new_list();
  ASSERT_CODE(manypy_value_dict_get_n(list, "a", 1, &untouched), MANYPY_ERR_WRONG_KIND);
  manypy_value_free(list);
  /* Past the size where a dict indexes its keys, every NUL key is found. */
  for (int k = 0; k < 40; ++k) {
    char name[8] = {'k', 0, (char)('0' + k / 10), (char)('0' + k % 10)};
    ASSERT_OK(manypy_value_dict_set_n(d, name, 4, manypy_value_new_int64(100 + k)));
  }
  for (int k = 0; k < 40; ++k) {
    char name[8] = {'k', 0, (char)('0' + k / 10), (char)('0' + k % 10)};
    ASSERT_OK(manypy_value_dict_get_n(d, name, 4, &item));
    assert_int_equal(get_int(item), 100 + k);
  }
  ASSERT_CODE(manypy_value_dict_get_n(d, "k", 1, &untouched), MANYPY_ERR_NO_SUCH_NAME);
  manypy_value_free(d);
}

static void test_null_arguments(void** state) {
  (void)state;
  manypy_value* v = SENTINEL_VALUE;
  ASSERT_INVALID_ARG(manypy_value_new_string("x", 1, NULL), "manypy_value_new_string", "out_value");
  ASSERT_INVALID_ARG(manypy_value_new_string(NULL, 3, &v), "manypy_value_new_string", "utf8");
  assert_ptr_equal(v, SENTINEL_VALUE);

  manypy_value* list = manypy_value_new_list();
  manypy_value* dict = manypy_value_new_dict();
  manypy_value* bytes = manypy_value_new_bytes("ab", 2);
  ASSERT_INVALID_ARG(manypy_value_append(NULL, manypy_value_new_none()), "manypy_value_append",
                     "sequence");
  ASSERT_INVALID_ARG(manypy_value_append(list, NULL), "manypy_value_append", "item");
  ASSERT_INVALID_ARG(manypy_value_dict_set(NULL, "k", manypy_value_new_none()),
                     "manypy_value_dict_set", "dict");
  ASSERT_INVALID_ARG(manypy_value_dict_set(dict, NULL, manypy_value_new_none()),
                     "manypy_value_dict_set", "key");
  ASSERT_INVALID_ARG(manypy_value_dict_set(dict, "k", NULL), "manypy_value_dict_set", "item");

  const void* data = NULL;
  size_t n = 0;
  ASSERT_INVALID_ARG(manypy_value_get_bytes(NULL, &data, &n), "manypy_value_get_bytes", "value");
  ASSERT_INVALID_ARG(manypy_value_get_bytes(bytes, NULL, &n), "manypy_value_get_bytes", "out_data");
  ASSERT_INVALID_ARG(manypy_value_get_bytes(bytes, &data, NULL), "manypy_value_get_bytes",
                     "out_length");
  ASSERT_INVALID_ARG(manypy_value_length(NULL, &n), "manypy_value_length", "value");
  ASSERT_INVALID_ARG(manypy_value_length(list, NULL), "manypy_value_length", "out_length");
  const manypy_value* item = NULL;
  ASSERT_INVALID_ARG(manypy_value_get_item(NULL, 0, &item), "manypy_value_get_item", "value");
  ASSERT_INVALID_ARG(manypy_value_get_item(list, 0, NULL), "manypy_value_get_item", "out_item");
  const char* key = NULL;
  ASSERT_INVALID_ARG(manypy_value_dict_key(NULL, 0, &key, NULL), "manypy_value_dict_key", "value");
  ASSERT_INVALID_ARG(manypy_value_dict_key(dict, 0, NULL, NULL), "manypy_value_dict_key",
                     "out_key");
  ASSERT_INVALID_ARG(manypy_value_dict_get(NULL, "k", &item), "manypy_value_dict_get", "value");
  ASSERT_INVALID_ARG(manypy_value_dict_get(dict, NULL, &item), "manypy_value_dict_get", "key");
  ASSERT_INVALID_ARG(manypy_value_dict_get(dict, "k", NULL), "manypy_value_dict_get", "out_item");
  DLManagedTensor* t = NULL;
  ASSERT_INVALID_ARG(manypy_value_get_tensor(NULL, &t), "manypy_value_get_tensor", "value");
  ASSERT_INVALID_ARG(manypy_value_get_tensor(list, NULL), "manypy_value_get_tensor", "out_tensor");
  /* The functions of 0.3. A NULL key is refused unless its length is 0. */
  ASSERT_INVALID_ARG(manypy_value_dict_set_n(NULL, "k", 1, manypy_value_new_none()),
                     "manypy_value_dict_set_n", "dict");
  ASSERT_INVALID_ARG(manypy_value_dict_set_n(dict, NULL, 1, manypy_value_new_none()),
                     "manypy_value_dict_set_n", "key");
  ASSERT_INVALID_ARG(manypy_value_dict_set_n(dict, "k", 1, NULL), "manypy_value_dict_set_n",
                     "item");
  ASSERT_INVALID_ARG(manypy_value_dict_get_n(NULL, "k", 1, &item), "manypy_value_dict_get_n",
                     "value");
  ASSERT_INVALID_ARG(manypy_value_dict_get_n(dict, NULL, 1, &item), "manypy_value_dict_get_n",
                     "key");
  ASSERT_INVALID_ARG(manypy_value_dict_get_n(dict, "k", 1, NULL), "manypy_value_dict_get_n",
                     "out_item");
  ASSERT_INVALID_ARG(manypy_value_clone(NULL, &v), "manypy_value_clone", "value");
  ASSERT_INVALID_ARG(manypy_value_clone(list, NULL), "manypy_value_clone", "out_value");
  ASSERT_INVALID_ARG(manypy_value_new_tensor_ref(NULL, &v), "manypy_value_new_tensor_ref",
                     "tensor");
  manypy_tensor* tensor = (manypy_tensor*)(uintptr_t)0x6d6d6d6d;
  ASSERT_INVALID_ARG(manypy_tensor_from_value(NULL, &tensor), "manypy_tensor_from_value", "value");
  ASSERT_INVALID_ARG(manypy_tensor_from_value(list, NULL), "manypy_tensor_from_value",
                     "out_tensor");
  assert_ptr_equal(tensor, (manypy_tensor*)(uintptr_t)0x6d6d6d6d);
  assert_ptr_equal(v, SENTINEL_VALUE);
  /* Nothing was added by the failing calls. */
  assert_int_equal(length_of(list), 0);
  assert_int_equal(length_of(dict), 0);
  manypy_value_free(list);
  manypy_value_free(dict);
  manypy_value_free(bytes);
}

/* ---- round trips through identity.pt (one interpreter) ----------------------- */

static manypy_pool* g_pool;
static manypy_package* g_identity_package;
static manypy_object* g_identity;

/* Calls identity with `x` (ownership taken) and checks the result equals
 * `expected` (borrowed). Then frees everything. */
static void roundtrip(manypy_value* x, const manypy_value* expected, const char* what) {
  manypy_value* args = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(args, x));
  manypy_value* result = NULL;
  manypy_status* s = manypy_object_call(g_identity, NULL, args, NULL, NULL, &result);
  if (s != NULL) {
    capi_print_status(what, s, __FILE__, __LINE__);
    manypy_status_free(s);
    manypy_value_free(args);
    fail_msg("identity(%s) failed", what);
  }
  char why[512];
  int equal = capi_values_equal(result, expected ? expected : item_at(args, 0), why, sizeof why);
  manypy_value_free(result);
  manypy_value_free(args);
  if (!equal) fail_msg("identity(%s) returned a different value: %s", what, why);
}

static void test_roundtrip_scalars(void** state) {
  (void)state;
  roundtrip(manypy_value_new_none(), NULL, "None");
  roundtrip(manypy_value_new_bool(1), NULL, "True");
  roundtrip(manypy_value_new_bool(0), NULL, "False");
  roundtrip(manypy_value_new_int64(0), NULL, "0");
  roundtrip(manypy_value_new_int64(INT64_MIN), NULL, "INT64_MIN");
  roundtrip(manypy_value_new_int64(INT64_MAX), NULL, "INT64_MAX");
  roundtrip(manypy_value_new_double(3.141592653589793), NULL, "pi");
  roundtrip(manypy_value_new_double(-0.0), NULL, "-0.0");
  roundtrip(manypy_value_new_double(-INFINITY), NULL, "-inf");
  roundtrip(manypy_value_new_double(5e-324), NULL, "the smallest subnormal");
  /* A bool stays a bool (not an int), an int stays an int (not a double). */
  manypy_value* args = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(args, manypy_value_new_bool(1)));
  manypy_value* r = NULL;
  ASSERT_OK(manypy_object_call(g_identity, NULL, args, NULL, NULL, &r));
  assert_int_equal(manypy_value_get_kind(r), MANYPY_VALUE_BOOL);
  manypy_value_free(r);
  manypy_value_free(args);
}

static void test_roundtrip_strings_and_bytes(void** state) {
  (void)state;
  roundtrip(STRING("plain ascii"), NULL, "an ASCII string");
  roundtrip(STRING("h\xc3\xa9llo \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80"), NULL,
            "a non-ASCII string");
  manypy_value* with_nul = NULL;
  ASSERT_OK(manypy_value_new_string("a\0b\0", 4, &with_nul));
  roundtrip(with_nul, NULL, "a string with NULs");
  roundtrip(STRING(""), NULL, "the empty string");
  const unsigned char raw[] = {0, 1, 0xff, 0, 'x', 0x80};
  roundtrip(manypy_value_new_bytes(raw, sizeof raw), NULL, "bytes with NUL");
  roundtrip(manypy_value_new_bytes(NULL, 0), NULL, "empty bytes");
  /* 1 MB of bytes. */
  size_t big = 1 << 20;
  unsigned char* data = malloc(big);
  for (size_t k = 0; k < big; ++k) data[k] = (unsigned char)(k * 7);
  roundtrip(manypy_value_new_bytes(data, big), NULL, "1 MB of bytes");
  free(data);
}

static float g_t1[6] = {1, 2, 3, 4, 5, 6};
static int32_t g_t2[3] = {-1, 0, 1};

static manypy_value* nested_value(atomic_int* deleted) {
  const int64_t shape1[2] = {2, 3};
  const int64_t shape2[1] = {3};
  DLDataType i32 = {kDLInt, 32, 1};
  manypy_value* t1 = NULL;
  manypy_value* t2 = NULL;
  ASSERT_OK(
      manypy_value_new_tensor(capi_counted_tensor(g_t1, kF32, 2, shape1, NULL, deleted), &t1));
  ASSERT_OK(manypy_value_new_tensor(capi_counted_tensor(g_t2, i32, 1, shape2, NULL, deleted), &t2));
  /* [ (1, "x", t1), {"t": t2, "l": [None, 2.5, b"\0"], "d": {"deep": ()}}, [], {} ] */
  manypy_value* tuple = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(tuple, manypy_value_new_int64(1)));
  ASSERT_OK(manypy_value_append(tuple, STRING("x")));
  ASSERT_OK(manypy_value_append(tuple, t1));
  manypy_value* l = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(l, manypy_value_new_none()));
  ASSERT_OK(manypy_value_append(l, manypy_value_new_double(2.5)));
  ASSERT_OK(manypy_value_append(l, manypy_value_new_bytes("\0", 1)));
  manypy_value* deep = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(deep, "deep", manypy_value_new_tuple()));
  manypy_value* dict = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(dict, "t", t2));
  ASSERT_OK(manypy_value_dict_set(dict, "l", l));
  ASSERT_OK(manypy_value_dict_set(dict, "d", deep));
  manypy_value* outer = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(outer, tuple));
  ASSERT_OK(manypy_value_append(outer, dict));
  ASSERT_OK(manypy_value_append(outer, manypy_value_new_list()));
  ASSERT_OK(manypy_value_append(outer, manypy_value_new_dict()));
  return outer;
}

static void test_roundtrip_nested_with_tensors(void** state) {
  (void)state;
  atomic_int deleted = 0;
  manypy_value* x = nested_value(&deleted);
  manypy_value* args = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(args, x));
  manypy_value* result = NULL;
  ASSERT_OK(manypy_object_call(g_identity, NULL, args, NULL, NULL, &result));
  x = NULL; /* owned by args now */
  ASSERT_VALUES_EQUAL(result, item_at(args, 0));
  /* Kinds are kept: the tuple is a tuple, the dicts are dicts. */
  assert_int_equal(manypy_value_get_kind(item_at(result, 0)), MANYPY_VALUE_TUPLE);
  assert_int_equal(manypy_value_get_kind(item_at(result, 1)), MANYPY_VALUE_DICT);
  /* The tensors are the caller's memory, not copies. */
  const manypy_value* rt = item_at(item_at(result, 0), 2);
  DLManagedTensor* m = NULL;
  ASSERT_OK(manypy_value_get_tensor(rt, &m));
  assert_ptr_equal(m->dl_tensor.data, g_t1);
  m->deleter(m);
  assert_int_equal(atomic_load(&deleted), 0);
  manypy_value_free(args);
  /* The result still shares both tensors. */
  assert_int_equal(atomic_load(&deleted), 0);
  manypy_value_free(result);
  assert_int_equal(atomic_load(&deleted), 2);
}

/* identity(x=value): keyword arguments reach forward. */
static void test_roundtrip_as_keyword(void** state) {
  (void)state;
  atomic_int deleted = 0;
  manypy_value* kwargs = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set(kwargs, "x", nested_value(&deleted)));
  manypy_value* result = NULL;
  ASSERT_OK(manypy_object_call(g_identity, NULL, NULL, kwargs, NULL, &result));
  const manypy_value* x = NULL;
  ASSERT_OK(manypy_value_dict_get(kwargs, "x", &x));
  ASSERT_VALUES_EQUAL(result, x);
  manypy_value_free(result);
  manypy_value_free(kwargs);
  assert_int_equal(atomic_load(&deleted), 2);
}

static void test_roundtrip_dict_key_order(void** state) {
  (void)state;
  manypy_value* d = manypy_value_new_dict();
  const char* keys[] = {"zeta", "alpha", "mu", "\xc3\xa9t\xc3\xa9", ""};
  for (int k = 0; k < 5; ++k)
    ASSERT_OK(manypy_value_dict_set(d, keys[k], manypy_value_new_int64(k)));
  roundtrip(d, NULL, "a dict with 5 keys in non-sorted order");
}

/* A key from Python may hold NUL: it reads back whole, with its length, and
 * crosses back into Python whole. */
static void test_dict_key_with_nul(void** state) {
  (void)state;
  manypy_value* d = NULL;
  ASSERT_OK(manypy_pool_eval(g_pool, 0, "{'a\\x00b': 1, 'c': 2}", &d));
  const char* key = NULL;
  size_t length = 0;
  ASSERT_OK(manypy_value_dict_key(d, 0, &key, &length));
  assert_int_equal(length, 3);
  assert_memory_equal(key, "a\0b", 4);  // NUL-terminated too
  /* identity returns the dict Python received: a key cut at its NUL would
   * come back as "a" and differ. */
  roundtrip(d, NULL, "a dict whose key holds NUL");
}

/* Keys given with their lengths reach Python whole: "a\0b" and "a" stay two
 * keys there (cut at the NUL they would collide) and come back as sent. */
static void test_dict_set_n_key_with_nul_round_trips(void** state) {
  (void)state;
  manypy_value* d = manypy_value_new_dict();
  ASSERT_OK(manypy_value_dict_set_n(d, "a\0b", 3, manypy_value_new_int64(1)));
  ASSERT_OK(manypy_value_dict_set_n(d, "a", 1, manypy_value_new_int64(2)));
  ASSERT_OK(manypy_value_dict_set_n(d, "\0", 1, manypy_value_new_int64(3)));
  manypy_value* args = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(args, d));
  d = NULL; /* moved into args */
  manypy_value* result = NULL;
  ASSERT_OK(manypy_object_call(g_identity, NULL, args, NULL, NULL, &result));
  ASSERT_VALUES_EQUAL(result, item_at(args, 0));
  assert_int_equal(length_of(result), 3);
  const manypy_value* item = NULL;
  ASSERT_OK(manypy_value_dict_get_n(result, "a\0b", 3, &item));
  assert_int_equal(get_int(item), 1);
  ASSERT_OK(manypy_value_dict_get_n(result, "\0", 1, &item));
  assert_int_equal(get_int(item), 3);
  manypy_value_free(result);
  manypy_value_free(args);

  /* And Python itself sees the three-character key. */
  manypy_value* lengths = NULL;
  ASSERT_OK(
      manypy_pool_eval(g_pool, 0, "sorted(len(k) for k in {'a\\x00b': 1, 'a': 2})", &lengths));
  assert_int_equal(get_int(item_at(lengths, 1)), 3);
  manypy_value_free(lengths);
}

/* A clone equals its original, shares its tensors (same memory, alive while
 * either holds them) and nothing else: each may change or go on its own. */
static void test_clone(void** state) {
  (void)state;
  manypy_value* scalars[] = {manypy_value_new_none(),           manypy_value_new_bool(1),
                             manypy_value_new_int64(INT64_MIN), manypy_value_new_double(-0.5),
                             manypy_value_new_bytes("\0\1", 2), NULL};
  ASSERT_OK(manypy_value_new_string("s\0t", 3, &scalars[5]));
  for (size_t k = 0; k < sizeof scalars / sizeof scalars[0]; ++k) {
    manypy_value* copy = NULL;
    ASSERT_OK(manypy_value_clone(scalars[k], &copy));
    assert_ptr_not_equal(copy, scalars[k]);
    ASSERT_VALUES_EQUAL(copy, scalars[k]);
    manypy_value_free(scalars[k]);
    manypy_value* again = NULL; /* the clone outlives its original */
    ASSERT_OK(manypy_value_clone(copy, &again));
    ASSERT_VALUES_EQUAL(again, copy);
    manypy_value_free(again);
    manypy_value_free(copy);
  }

  atomic_int deleted = 0;
  manypy_value* original = nested_value(&deleted);
  manypy_value* copy = NULL;
  ASSERT_OK(manypy_value_clone(original, &copy));
  ASSERT_VALUES_EQUAL(copy, original);
  /* Tensors are shared, not copied. */
  DLManagedTensor* a = NULL;
  DLManagedTensor* b = NULL;
  ASSERT_OK(manypy_value_get_tensor(item_at(item_at(original, 0), 2), &a));
  ASSERT_OK(manypy_value_get_tensor(item_at(item_at(copy, 0), 2), &b));
  assert_ptr_equal(a->dl_tensor.data, g_t1);
  assert_ptr_equal(b->dl_tensor.data, g_t1);
  a->deleter(a);
  b->deleter(b);
  /* Strings are copied: a borrowed string of each is its own. */
  const char* text_a = NULL;
  const char* text_b = NULL;
  ASSERT_OK(manypy_value_get_string(item_at(item_at(original, 0), 1), &text_a, NULL));
  ASSERT_OK(manypy_value_get_string(item_at(item_at(copy, 0), 1), &text_b, NULL));
  assert_ptr_not_equal(text_a, text_b);
  /* Containers are copied: growing one leaves the other as it was. */
  ASSERT_OK(manypy_value_append(copy, manypy_value_new_int64(7)));
  assert_int_equal(length_of(original), 4);
  assert_int_equal(length_of(copy), 5);
  /* Dict lookups work on the clone (its key index is its own). */
  const manypy_value* l = NULL;
  ASSERT_OK(manypy_value_dict_get(item_at(copy, 1), "l", &l));
  ASSERT_VALUES_EQUAL(l, item_at(item_at(original, 1), 1));
  /* The tensors' memory goes with the last of the two. */
  manypy_value_free(original);
  assert_int_equal(atomic_load(&deleted), 0);
  manypy_value_free(copy);
  assert_int_equal(atomic_load(&deleted), 2);

  /* A big dict (indexed keys), and a borrowed item cloned on its own. */
  manypy_value* big = manypy_value_new_dict();
  for (int k = 0; k < 50; ++k) {
    char name[16];
    snprintf(name, sizeof name, "key%d", k);
    ASSERT_OK(manypy_value_dict_set(big, name, manypy_value_new_int64(k)));
  }
  ASSERT_OK(manypy_value_clone(big, &copy));
  manypy_value_free(big);
  for (int k = 0; k < 50; ++k) {
    char name[16];
    snprintf(name, sizeof name, "key%d", k);
    const manypy_value* v = NULL;
    ASSERT_OK(manypy_value_dict_get(copy, name, &v));
    assert_int_equal(get_int(v), k);
  }
  manypy_value* part = NULL;
  ASSERT_OK(manypy_value_clone(item_at(copy, 49), &part));
  manypy_value_free(copy);
  assert_int_equal(get_int(part), 49);
  manypy_value_free(part);
}

/* The way a binding reuses a prepared argument: a clone of it in each
 * call's arguments, the original freed while the clones are in use. */
static void test_clone_per_call(void** state) {
  (void)state;
  atomic_int deleted = 0;
  manypy_value* prepared = nested_value(&deleted);
  manypy_value* expected = NULL;
  ASSERT_OK(manypy_value_clone(prepared, &expected));
  for (int k = 0; k < 10; ++k) {
    manypy_value* arg = NULL;
    ASSERT_OK(manypy_value_clone(prepared, &arg));
    if (k == 5) {
      manypy_value_free(prepared);
      prepared = arg;
      ASSERT_OK(manypy_value_clone(prepared, &arg));
    }
    manypy_value* args = manypy_value_new_tuple();
    ASSERT_OK(manypy_value_append(args, arg));
    manypy_value* result = NULL;
    ASSERT_OK(manypy_object_call(g_identity, NULL, args, NULL, NULL, &result));
    ASSERT_VALUES_EQUAL(result, expected);
    manypy_value_free(args);
    manypy_value_free(result);
  }
  assert_int_equal(atomic_load(&deleted), 0);
  manypy_value_free(prepared);
  assert_int_equal(atomic_load(&deleted), 0);
  manypy_value_free(expected);
  assert_int_equal(atomic_load(&deleted), 2);
}

/* Borrowed items and keys stay where they are while their container grows. */
static void test_borrowed_items_survive_appends(void** state) {
  (void)state;
  manypy_value* list = manypy_value_new_list();
  manypy_value* dict = manypy_value_new_dict();
  ASSERT_OK(manypy_value_append(list, STRING("first")));
  ASSERT_OK(manypy_value_dict_set(dict, "k0", STRING("first")));
  const manypy_value *item = NULL, *entry = NULL;
  const char* key = NULL;
  ASSERT_OK(manypy_value_get_item(list, 0, &item));
  ASSERT_OK(manypy_value_dict_get(dict, "k0", &entry));
  ASSERT_OK(manypy_value_dict_key(dict, 0, &key, NULL));
  for (int k = 1; k < 5000; ++k) {
    char name[32];
    snprintf(name, sizeof name, "k%d", k);
    ASSERT_OK(manypy_value_append(list, manypy_value_new_int64(k)));
    ASSERT_OK(manypy_value_dict_set(dict, name, manypy_value_new_int64(k)));
  }
  const char* text = NULL;
  ASSERT_OK(manypy_value_get_string(item, &text, NULL));
  assert_string_equal(text, "first");
  ASSERT_OK(manypy_value_get_string(entry, &text, NULL));
  assert_string_equal(text, "first");
  assert_string_equal(key, "k0");
  manypy_value_free(dict);
  manypy_value_free(list);
}

static void test_one_value_many_calls(void** state) {
  (void)state;
  /* A value that is only read may be passed to any number of calls. */
  atomic_int deleted = 0;
  manypy_value* args = manypy_value_new_list();
  ASSERT_OK(manypy_value_append(args, nested_value(&deleted)));
  for (int k = 0; k < 20; ++k) {
    manypy_value* result = NULL;
    ASSERT_OK(manypy_object_call(g_identity, NULL, args, NULL, NULL, &result));
    ASSERT_VALUES_EQUAL(result, item_at(args, 0));
    manypy_value_free(result);
  }
  assert_int_equal(atomic_load(&deleted), 0);
  manypy_value_free(args);
  assert_int_equal(atomic_load(&deleted), 2);
}

/* ---- manypy_pool_eval results of container, bytes and tensor kinds ------------ */

static manypy_value* eval(const char* expression) {
  manypy_value* v = NULL;
  ASSERT_OK(manypy_pool_eval(g_pool, 0, expression, &v));
  assert_non_null(v);
  return v;
}

static void test_eval_list_tuple_dict(void** state) {
  (void)state;
  manypy_value* v = eval("[1, 'two', 3.0, None, True, b'six']");
  assert_int_equal(manypy_value_get_kind(v), MANYPY_VALUE_LIST);
  assert_int_equal(length_of(v), 6);
  assert_int_equal(get_int(item_at(v, 0)), 1);
  const char* s = NULL;
  ASSERT_OK(manypy_value_get_string(item_at(v, 1), &s, NULL));
  assert_string_equal(s, "two");
  assert_int_equal(manypy_value_get_kind(item_at(v, 2)), MANYPY_VALUE_DOUBLE);
  assert_int_equal(manypy_value_get_kind(item_at(v, 3)), MANYPY_VALUE_NONE);
  assert_int_equal(manypy_value_get_kind(item_at(v, 4)), MANYPY_VALUE_BOOL);
  assert_int_equal(manypy_value_get_kind(item_at(v, 5)), MANYPY_VALUE_BYTES);
  manypy_value_free(v);

  v = eval("(1, (2, (3,)), [])");
  assert_int_equal(manypy_value_get_kind(v), MANYPY_VALUE_TUPLE);
  assert_int_equal(length_of(v), 3);
  const manypy_value* inner = item_at(v, 1);
  assert_int_equal(manypy_value_get_kind(inner), MANYPY_VALUE_TUPLE);
  assert_int_equal(get_int(item_at(item_at(inner, 1), 0)), 3);
  assert_int_equal(manypy_value_get_kind(item_at(v, 2)), MANYPY_VALUE_LIST);
  assert_int_equal(length_of(item_at(v, 2)), 0);
  manypy_value_free(v);

  /* Insertion order, not sorted. */
  v = eval("{'b': 1, 'a': [b'x', {'c': ()}], '\\u00e9': None}");
  assert_int_equal(manypy_value_get_kind(v), MANYPY_VALUE_DICT);
  assert_int_equal(length_of(v), 3);
  const char* key = NULL;
  ASSERT_OK(manypy_value_dict_key(v, 0, &key, NULL));
  assert_string_equal(key, "b");
  ASSERT_OK(manypy_value_dict_key(v, 1, &key, NULL));
  assert_string_equal(key, "a");
  ASSERT_OK(manypy_value_dict_key(v, 2, &key, NULL));
  assert_string_equal(key, "\xc3\xa9");
  const manypy_value* a = NULL;
  ASSERT_OK(manypy_value_dict_get(v, "a", &a));
  const manypy_value* c = NULL;
  ASSERT_OK(manypy_value_dict_get(item_at(a, 1), "c", &c));
  assert_int_equal(manypy_value_get_kind(c), MANYPY_VALUE_TUPLE);
  manypy_value_free(v);

  v = eval("{}");
  assert_int_equal(manypy_value_get_kind(v), MANYPY_VALUE_DICT);
  assert_int_equal(length_of(v), 0);
  manypy_value_free(v);
}

static void test_eval_bytes(void** state) {
  (void)state;
  manypy_value* v = eval("b'\\x00\\xffab' + bytes(range(3))");
  assert_int_equal(manypy_value_get_kind(v), MANYPY_VALUE_BYTES);
  const void* data = NULL;
  size_t n = 0;
  ASSERT_OK(manypy_value_get_bytes(v, &data, &n));
  assert_int_equal(n, 7);
  assert_memory_equal(data,
                      "\x00\xff"
                      "ab\x00\x01\x02",
                      7);
  manypy_value_free(v);
  v = eval("bytearray(b'xyz')");
  assert_int_equal(manypy_value_get_kind(v), MANYPY_VALUE_BYTES);
  ASSERT_OK(manypy_value_get_bytes(v, &data, &n));
  assert_int_equal(n, 3);
  assert_memory_equal(data, "xyz", 3);
  manypy_value_free(v);
}

static void test_eval_tensors(void** state) {
  (void)state;
  ASSERT_OK(manypy_pool_exec(g_pool, 0, "import torch"));
  manypy_value* v = eval("torch.arange(6, dtype=torch.int64).reshape(2, 3)");
  assert_int_equal(manypy_value_get_kind(v), MANYPY_VALUE_TENSOR);
  DLManagedTensor* m = NULL;
  ASSERT_OK(manypy_value_get_tensor(v, &m));
  const DLTensor* t = &m->dl_tensor;
  assert_int_equal(t->device.device_type, kDLCPU);
  assert_int_equal(t->dtype.code, kDLInt);
  assert_int_equal(t->dtype.bits, 64);
  assert_int_equal(t->dtype.lanes, 1);
  assert_int_equal(t->ndim, 2);
  assert_int_equal(t->shape[0], 2);
  assert_int_equal(t->shape[1], 3);
  for (int64_t k = 0; k < 6; ++k) assert_int_equal(*(const int64_t*)capi_element(t, k), k);
  m->deleter(m);
  manypy_value_free(v);

  /* A non-contiguous result (a transpose): read through its strides. */
  v = eval("torch.arange(12, dtype=torch.float32).reshape(3, 4).t()");
  ASSERT_OK(manypy_value_get_tensor(v, &m));
  t = &m->dl_tensor;
  assert_int_equal(t->ndim, 2);
  assert_int_equal(t->shape[0], 4);
  assert_int_equal(t->shape[1], 3);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      float x;
      memcpy(&x, capi_element(t, i * 3 + j), 4);
      assert_true(x == (float)(j * 4 + i));
    }
  }
  m->deleter(m);
  manypy_value_free(v);

  /* A view with a storage offset and a step: x[3::2] of arange(10). */
  v = eval("torch.arange(10, dtype=torch.int64)[3::2]");
  ASSERT_OK(manypy_value_get_tensor(v, &m));
  t = &m->dl_tensor;
  assert_int_equal(t->ndim, 1);
  assert_int_equal(t->shape[0], 4);
  for (int64_t k = 0; k < 4; ++k) assert_int_equal(*(const int64_t*)capi_element(t, k), 3 + 2 * k);
  m->deleter(m);
  manypy_value_free(v);

  /* Tensors inside containers; one needing grad comes back detached. */
  v = eval(
      "{'w': torch.ones(2, requires_grad=True) * 2, 'rest': [torch.zeros(0), "
      "(torch.tensor(7.5),)]}");
  const manypy_value* w = NULL;
  ASSERT_OK(manypy_value_dict_get(v, "w", &w));
  const int64_t two[1] = {2};
  const float expected_w[2] = {2, 2};
  ASSERT_F32_TENSOR(w, 1, two, expected_w, 0, "w");
  const manypy_value* rest = NULL;
  ASSERT_OK(manypy_value_dict_get(v, "rest", &rest));
  const int64_t zero[1] = {0};
  ASSERT_F32_TENSOR(item_at(rest, 0), 1, zero, NULL, 0, "an empty tensor");
  const float scalar = 7.5f;
  ASSERT_F32_TENSOR(item_at(item_at(rest, 1), 0), 0, NULL, &scalar, 0, "a 0-d tensor");
  manypy_value_free(v);
}

/* ---- setup ------------------------------------------------------------------------- */

static int pool_setup(void** state) {
  (void)state;
  double t0 = capi_now();
  manypy_status* s = manypy_pool_create(NULL, &g_pool);
  if (s == NULL)
    s = manypy_package_load_file(g_pool, capi_archive("identity.pt"), &g_identity_package);
  if (s == NULL)
    s = manypy_package_load_pickle(g_identity_package, "model", "model.pkl", &g_identity);
  if (s != NULL) {
    capi_print_status("setting up the pool and identity.pt", s, __FILE__, __LINE__);
    manypy_status_free(s);
    return -1;
  }
  fprintf(stderr, "capi_values: pool and identity.pt ready in %.2f s\n", capi_now() - t0);
  return 0;
}

static int pool_teardown(void** state) {
  (void)state;
  manypy_object_free(g_identity);
  manypy_package_free(g_identity_package);
  manypy_pool_destroy(g_pool);
  return 0;
}

int main(void) {
  double t0 = capi_now();
  const struct CMUnitTest no_interpreter[] = {
      cmocka_unit_test(test_scalar_builders),
      cmocka_unit_test(test_bytes_and_strings),
      cmocka_unit_test(test_invalid_utf8_structure),
      cmocka_unit_test(test_invalid_utf8_overlong_surrogate_range),
      cmocka_unit_test(test_list_and_tuple),
      cmocka_unit_test(test_dict),
      cmocka_unit_test(test_nested_containers),
      cmocka_unit_test(test_wrong_kinds),
      cmocka_unit_test(test_append_and_dict_set_own_item_on_failure),
      cmocka_unit_test(test_value_cannot_contain_itself),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_dict_set_n_and_get_n),
      cmocka_unit_test(test_clone),
  };
  const struct CMUnitTest with_pool[] = {
      cmocka_unit_test(test_roundtrip_scalars),
      cmocka_unit_test(test_roundtrip_strings_and_bytes),
      cmocka_unit_test(test_roundtrip_nested_with_tensors),
      cmocka_unit_test(test_roundtrip_as_keyword),
      cmocka_unit_test(test_roundtrip_dict_key_order),
      cmocka_unit_test(test_one_value_many_calls),
      cmocka_unit_test(test_dict_key_with_nul),
      cmocka_unit_test(test_dict_set_n_key_with_nul_round_trips),
      cmocka_unit_test(test_clone_per_call),
      cmocka_unit_test(test_borrowed_items_survive_appends),
      cmocka_unit_test(test_eval_list_tuple_dict),
      cmocka_unit_test(test_eval_bytes),
      cmocka_unit_test(test_eval_tensors),
  };
  int failed =
      cmocka_run_group_tests_name("capi_values (no interpreter)", no_interpreter, NULL, NULL);
  failed += cmocka_run_group_tests_name("capi_values (identity.pt)", with_pool, pool_setup,
                                        pool_teardown);
  fprintf(stderr, "capi_values: %.1f s\n", capi_now() - t0);
  return failed == 0 ? 0 : 1;
}
