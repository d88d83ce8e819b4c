/* What the benchmarks share: clocks, progress lines, dying on a failed call,
 * sorting helpers. Each program sets bench_program to its name. */
#ifndef MANYPY_BENCH_UTIL_H
#define MANYPY_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "manypy.h"

/* The program's name, for error messages. */
extern const char* bench_program;

int64_t now_ns(void);
double now_s(void);
void sleep_s(double seconds);

/* A "[bench] ..." line on stderr. */
void progress(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "<program>: <message>" and exit 1. */
void die(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Print a failed status (code, message, traceback), free it, exit 1. */
void die_status(const char* what, manypy_status* st) __attribute__((noreturn));

#define CHECK(call, what)                   \
  do {                                      \
    manypy_status* st_ = (call);            \
    if (st_ != NULL) die_status(what, st_); \
  } while (0)

void* xmalloc(size_t n);

/* "meets" or "misses", for target tables. */
const char* verdict(int ok);

/* qsort comparators. */
int cmp_double(const void* a, const void* b);
int cmp_long(const void* a, const void* b);
int cmp_i64(const void* a, const void* b);

#endif
