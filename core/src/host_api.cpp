// The services the host offers every interpreter (mpi_host_api).
#include "api_usage.h"
#include "export_hook.h"
#include "interpreter.h"
#include "package.h"

namespace manypy {

namespace {
const mpi_host_api kHostApi = {package_record_for_interpreter, api_usage::log,
                               export_hook::collect};
}  // namespace

const mpi_host_api* interpreter_host_api() { return &kHostApi; }

}  // namespace manypy
