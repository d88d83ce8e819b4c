#include "runtime.h"

#include "stack_headroom.h"

namespace manypy {

namespace {

// mpi_host_api's entries are plain C functions: each reaches the one Runtime.
int read_package_record(uint64_t package_id, const char* record, uint64_t nbytes,
                        DLManagedTensor** out, char* error, size_t error_size) {
  return Runtime::get().open_archives().read_record(package_id, record, nbytes, out, error,
                                                    error_size);
}

void log_api_usage(const char* key) { Runtime::get().api_usage().log(key); }

void collect_export_files(void (*add)(void* ctx, const char* name, const void* data, size_t size),
                          void* ctx) {
  Runtime::get().export_hook().collect(add, ctx);
}

size_t thread_stack_room() { return stack_headroom(); }

// Made as the library loads (see runtime.h).
[[maybe_unused]] const Runtime& g_made_at_load = Runtime::get();

}  // namespace

Runtime& Runtime::get() {
  // Never destroyed: interpreters, and the threads that call into the
  // runtime from them, outlive every static destructor.
  static Runtime* runtime = new Runtime();
  return *runtime;
}

Runtime::Runtime()
    : host_api_{read_package_record, log_api_usage, collect_export_files, thread_stack_room},
      interpreters_(HostServices{&host_api_, lock_process_state}, operator_libraries_,
                    operator_callbacks_) {}

void Runtime::lock_process_state(int acquire) {
  std::mutex& mu = get().process_state_mu_;
  if (acquire) {
    mu.lock();
  } else {
    mu.unlock();
  }
}

}  // namespace manypy
