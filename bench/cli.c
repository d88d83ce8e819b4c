#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

/* `text` wholly a number in [min, max] (a whole one if `whole`), or 0. */
static int to_number(const char* text, double min, double max, int whole, double* out) {
  char* end = NULL;
  const double v = strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= min && v <= max)) return 0;
  if (whole && v != floor(v)) return 0;
  *out = v;
  return 1;
}

/* The option's value as a number in its range, or the usage and exit 2. */
static void parse_number(const cli_option* o, const char* text, int whole, double* out,
                         const char* usage) {
  if (!to_number(text, o->min, o->max, whole, out)) {
    die_usage(usage, "%s wants %s in [%.15g, %.15g], not '%s'", o->name,
              whole ? "a whole number" : "a number", o->min, o->max, text);
  }
}

static void int_list(const cli_option* o, const char* text, const char* usage) {
  int* values = o->value;
  int n = 0;
  const char* item = text;
  for (;;) {
    const char* comma = strchr(item, ',');
    const size_t len = comma ? (size_t)(comma - item) : strlen(item);
    char buf[32];
    if (len == 0 || len >= sizeof buf) {
      die_usage(usage, "%s wants comma-separated whole numbers, not '%s'", o->name, text);
    }
    if (n == o->max_count) die_usage(usage, "%s takes at most %d values", o->name, o->max_count);
    memcpy(buf, item, len);
    buf[len] = '\0';
    double v;
    parse_number(o, buf, 1, &v, usage);
    values[n++] = (int)v;
    if (!comma) break;
    item = comma + 1;
  }
  *o->count = n;
}

static void set_value(const cli_option* o, const char* text, const char* usage) {
  double v;
  switch (o->kind) {
    case CLI_NUMBER:
      parse_number(o, text, 0, &v, usage);
      *(double*)o->value = v;
      break;
    case CLI_INT:
      parse_number(o, text, 1, &v, usage);
      *(int*)o->value = (int)v;
      break;
    case CLI_STRING:
      *(const char**)o->value = text;
      break;
    case CLI_INT_LIST:
      int_list(o, text, usage);
      break;
    case CLI_FLAG:
      break;
  }
}

void cli_parse(int argc, char** argv, cli_option* opts, size_t nopts, const char* usage) {
  for (size_t k = 0; k < nopts; ++k) opts[k].given = 0;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      fputs(usage, stdout);
      exit(0);
    }
    const char* eq = strchr(arg, '=');
    const size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    cli_option* o = NULL;
    for (size_t k = 0; k < nopts && !o; ++k) {
      if (strlen(opts[k].name) == name_len && strncmp(opts[k].name, arg, name_len) == 0) {
        o = &opts[k];
      }
    }
    if (!o) die_usage(usage, "unknown option '%s'", arg);
    o->given = 1;
    if (o->kind == CLI_FLAG) {
      if (eq) die_usage(usage, "%s takes no value", o->name);
      *(int*)o->value = 1;
      continue;
    }
    const char* text = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!text) die_usage(usage, "%s wants a value", o->name);
    set_value(o, text, usage);
  }
}

int cli_given(const cli_option* opts, size_t nopts, const char* name) {
  for (size_t k = 0; k < nopts; ++k) {
    if (strcmp(opts[k].name, name) == 0) return opts[k].given;
  }
  return 0;
}

int cli_env_number(const char* var, double min, double max, double* value) {
  const char* text = getenv(var);
  if (!text || !*text) return 0;
  if (!to_number(text, min, max, 0, value)) {
    die_usage(NULL, "$%s wants a number in [%.15g, %.15g], not '%s'", var, min, max, text);
  }
  return 1;
}
