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

#include <stddef.h>
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
  /* Makes every TorchScript archive this libtorch writes (torch.jit.save)
   * carry the files `collect` produces: collect calls add(ctx, name, data,
   * size) for each, with pointers valid during that add call. */
  void (*set_export_files)(void (*collect)(void (*add)(void* ctx, const char* name,
                                                        const void* data, size_t size),
                                            void* ctx));
} manypy_hooks_api;

typedef const manypy_hooks_api* (*manypy_hooks_get_api_fn)(uint32_t version);

#ifdef __cplusplus
}
#endif

#endif
