/*
 * The table of libmanypy_hooks.so: C++ code of ours that talks to the
 * libtorch of the namespace it is loaded into. The interpreter side loads it
 * into each namespace after the namespace's pthread keys are fenced (it
 * pulls in libc10, whose constructors create keys) and before `import
 * torch`, so hooks are in place for everything torch does. Only C types and
 * function pointers cross.
 */
#ifndef MANYPY_HOOKS_API_H
#define MANYPY_HOOKS_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MANYPY_HOOKS_API_VERSION 1u

typedef struct manypy_hooks_api {
  uint32_t version;
  uint32_t size;
  /* Routes this libtorch's API usage events (c10::LogAPIUsage) to `log`.
   * `log` is host code: it may run on any thread, and must not throw. */
  void (*set_api_usage_logger)(void (*log)(const char* key));
} manypy_hooks_api;

typedef const manypy_hooks_api* (*manypy_hooks_get_api_fn)(uint32_t version);

#ifdef __cplusplus
}
#endif

#endif
