/* The built-in profiler: aggregates by model id and operator, Prometheus
 * text that prometheus_client's parser accepts, Chrome trace JSON with the
 * trace-event fields. The parsers run in an interpreter (Python's json and
 * Debian's python3-prometheus-client). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_test_support.h"

static void write_file(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_profile_prometheus_and_trace(void** state) {
  (void)state;
  manypy_pool* pool = MAKE_POOL(2, MANYPY_THREAD_MODE_DIRECT);
  manypy_package* package = LOAD_PACKAGE(pool, "python_heavy.pt");
  manypy_object* model = LOAD_MODEL(package);
  manypy_profiler* profiler = NULL;
  ASSERT_OK(manypy_profiler_start(1.0, &profiler));

  float* input = READ_F32("python_heavy.input.bin", 4 * 64);
  const int64_t shape[2] = {4, 64};
  manypy_value* args = manypy_value_new_tuple();
  ASSERT_OK(manypy_value_append(args, F32_TENSOR(input, 2, shape)));
  free(input);
  manypy_call_options* options = manypy_call_options_new();
  ASSERT_OK(manypy_call_options_set_context(options, "heavy \"v1\"", "req-1"));
  for (int k = 0; k < 20; ++k) {
    manypy_value* out = NULL;
    ASSERT_OK(manypy_object_call(model, NULL, args, NULL, options, &out));
    manypy_value_free(out);
  }

  manypy_profile_entry* entries = NULL;
  size_t n = 0;
  ASSERT_OK(manypy_profiler_snapshot(profiler, &entries, &n));
  int found = 0;
  for (size_t k = 0; k < n; ++k) {
    if (strcmp(entries[k].model_id, "heavy \"v1\"") == 0 &&
        strcmp(entries[k].op_name, "aten::linear") == 0) {
      found = 1;
      assert_true(entries[k].count >= 20 * 24); /* 24 linear layers per call */
      assert_true(entries[k].total_ns > 0);
      assert_true(entries[k].p50_ns > 0 && entries[k].p50_ns <= entries[k].p99_ns);
    }
  }
  assert_true(found);
  manypy_profile_entries_free(entries, n);

  /* Prometheus text, parsed by prometheus_client in interpreter 0. */
  char prom_path[128], trace_path[128], code[2048];
  snprintf(prom_path, sizeof prom_path, "/tmp/manypy-prom-%d.txt", (int)getpid());
  snprintf(trace_path, sizeof trace_path, "/tmp/manypy-trace-%d.json", (int)getpid());
  manypy_value* text = NULL;
  ASSERT_OK(manypy_profiler_prometheus(profiler, &text));
  const char* prom = NULL;
  ASSERT_OK(manypy_value_get_string(text, &prom, NULL));
  write_file(prom_path, prom);
  manypy_value_free(text);
  snprintf(
      code, sizeof code,
      "from prometheus_client.parser import text_string_to_metric_families\n"
      "families = list(text_string_to_metric_families(open('%s').read()))\n"
      "summary = [f for f in families if f.name == 'manypy_operator_duration_seconds']\n"
      "linear = [s for s in summary[0].samples if s.labels.get('operator') == 'aten::linear'\n"
      "          and s.labels.get('model') == 'heavy \"v1\"' and s.name.endswith('_count')]\n"
      "prom_ok = len(summary) == 1 and summary[0].type == 'summary' and linear[0].value >= 480\n",
      prom_path);
  ASSERT_OK(manypy_pool_exec(pool, 0, code));
  assert_int_equal(EVAL_BOOL(pool, 0, "prom_ok"), 1);

  /* Chrome trace JSON. */
  manypy_value* json = NULL;
  ASSERT_OK(manypy_profiler_chrome_trace(profiler, &json));
  const char* trace = NULL;
  ASSERT_OK(manypy_value_get_string(json, &trace, NULL));
  write_file(trace_path, trace);
  manypy_value_free(json);
  snprintf(code, sizeof code,
           "import json\n"
           "events = json.load(open('%s'))['traceEvents']\n"
           "fields = all({'name', 'ph', 'ts', 'dur', 'pid', 'tid'} <= set(e) for e in events)\n"
           "trace_ok = len(events) > 0 and fields and all(e['ph'] == 'X' and e['dur'] >= 0\n"
           "    for e in events) and any(e['args']['request_id'] == 'req-1' for e in events)\n",
           trace_path);
  ASSERT_OK(manypy_pool_exec(pool, 0, code));
  assert_int_equal(EVAL_BOOL(pool, 0, "trace_ok"), 1);

  /* After free, nothing more is recorded (the registration is gone). */
  manypy_profiler_free(profiler);
  manypy_status* s = EXPECT_CODE(manypy_profiler_start(1.5, &profiler), MANYPY_ERR_OUT_OF_RANGE);
  manypy_status_free(s);

  unlink(prom_path);
  unlink(trace_path);
  manypy_call_options_free(options);
  manypy_value_free(args);
  manypy_object_free(model);
  manypy_package_free(package);
  manypy_pool_destroy(pool);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_profile_prometheus_and_trace),
  };
  return cmocka_run_group_tests_name("capi_profiler", tests, NULL, NULL);
}
