/* The command line of the C benchmarks: one parser for every program's
 * options, so each accepts the same forms and answers bad input the same
 * way.
 *
 * Each program describes its options in a table:
 *
 *   static int quick;
 *   static double seconds = 3;
 *   cli_option opts[] = {
 *       CLI_OPT_FLAG("--quick", &quick),
 *       CLI_OPT_NUMBER("--seconds", &seconds, 0.01, 3600),
 *   };
 *   cli_parse(argc, argv, opts, 2, usage);
 *
 * Accepted: "--name value" and "--name=value" for options with a value;
 * "--help" and "-h" print `usage` to stdout and exit 0. Anything else (an
 * unknown option, a missing value, a value out of range or not wholly a
 * number) prints "<bench_program>: <what is wrong>" and `usage` to stderr
 * and exits 2. An option given twice keeps its last value. */
#ifndef MANYPY_BENCH_CLI_H
#define MANYPY_BENCH_CLI_H

#include <stddef.h>

typedef enum cli_kind {
  CLI_FLAG,     /* no value; int* set to 1 */
  CLI_NUMBER,   /* double*, in [min, max] */
  CLI_INT,      /* int*, a whole number in [min, max] */
  CLI_STRING,   /* const char**, pointing into argv */
  CLI_INT_LIST, /* int[max_count], comma-separated whole numbers each in
                 * [min, max]; their number in *count */
} cli_kind;

typedef struct cli_option {
  const char* name; /* with its dashes: "--seconds" */
  cli_kind kind;
  void* value;
  double min, max; /* CLI_NUMBER, CLI_INT, CLI_INT_LIST */
  int max_count;   /* CLI_INT_LIST */
  int* count;      /* CLI_INT_LIST */
  int given;       /* set by cli_parse: the option was on the command line */
} cli_option;

/* Table rows. The conditional checks the pointer's type at compile time
 * (a mismatch warns). */
#define CLI_TYPED_(type, ptr) ((void*)(1 ? (ptr) : (type*)0))
#define CLI_OPT_FLAG(opt, ptr) \
  { .name = (opt), .kind = CLI_FLAG, .value = CLI_TYPED_(int, ptr) }
#define CLI_OPT_NUMBER(opt, ptr, lo, hi) \
  { .name = (opt), .kind = CLI_NUMBER, .value = CLI_TYPED_(double, ptr), .min = (lo), .max = (hi) }
#define CLI_OPT_INT(opt, ptr, lo, hi) \
  { .name = (opt), .kind = CLI_INT, .value = CLI_TYPED_(int, ptr), .min = (lo), .max = (hi) }
#define CLI_OPT_STRING(opt, ptr) \
  { .name = (opt), .kind = CLI_STRING, .value = CLI_TYPED_(const char*, ptr) }
#define CLI_OPT_INT_LIST(opt, array, lo, hi, most, count_ptr)                          \
  {                                                                                    \
    .name = (opt), .kind = CLI_INT_LIST, .value = CLI_TYPED_(int, array), .min = (lo), \
    .max = (hi), .max_count = (most), .count = (count_ptr)                             \
  }

/* Parses argv[1..argc-1] into the options' values (see the top); sets each
 * option's `given`. Returns only when every argument was accepted. */
void cli_parse(int argc, char** argv, cli_option* opts, size_t nopts, const char* usage);

/* Whether the option `name` was given (0 also when it is not in opts). */
int cli_given(const cli_option* opts, size_t nopts, const char* name);

/* The environment variable `var` as a number in [min, max] into *value,
 * when it is set and not empty; exits 2 naming the variable when it is not
 * such a number. Returns whether it was set. */
int cli_env_number(const char* var, double min, double max, double* value);

#endif
