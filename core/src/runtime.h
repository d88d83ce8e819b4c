// Everything manypy keeps process-wide, in one object: the interpreters that
// pools lease, the registries each interpreter joins when it starts
// (operator libraries and callbacks), API usage, the export hook, and the
// archives of open packages, with the services that interpreters call
// (mpi_host_api, and the lock around process-wide state) built over them.
//
// There is one, made when the library loads (the host's libtorch reports API
// usage and asks for export files from its first use) and never destroyed:
// interpreters live as long as the process (docs/isolation.md), and so does
// everything they may call. Nothing below this file reaches it: each part
// gets what it needs through its constructor, so the core's layers only
// look down (docs/architecture.md, "Where things go").
#pragma once

#include <mutex>

#include "api_usage.h"
#include "export_hook.h"
#include "interp_api.h"
#include "interpreter_set.h"
#include "open_archives.h"
#include "operator_callbacks.h"
#include "operator_libraries.h"

namespace manypy {

class Runtime {
 public:
  // The process's runtime. Thread safe.
  static Runtime& get();

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  InterpreterSet& interpreters() { return interpreters_; }
  OperatorCallbacks& operator_callbacks() { return operator_callbacks_; }
  OperatorLibraries& operator_libraries() { return operator_libraries_; }
  ApiUsage& api_usage() { return api_usage_; }
  ExportHook& export_hook() { return export_hook_; }
  OpenArchives& open_archives() { return open_archives_; }

 private:
  Runtime();
  // mpi_start_options.process_lock: takes (1) or drops (0) process_state_mu_.
  static void lock_process_state(int acquire);

  ApiUsage api_usage_;
  ExportHook export_hook_;
  OpenArchives open_archives_;
  OperatorLibraries operator_libraries_;
  OperatorCallbacks operator_callbacks_;
  const mpi_host_api host_api_;  // over the members above
  // Held by an interpreter's own code around work on process-wide state
  // (mpi_start_options.process_lock).
  std::mutex process_state_mu_;
  InterpreterSet interpreters_;  // last: its interpreters use all of the above
};

}  // namespace manypy
