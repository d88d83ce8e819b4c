// The host workers: threads that run asynchronous TorchScript calls in the
// host's libtorch (manypy_script_call_async), one per core, started at the
// first such call, for the life of the process.
#pragma once

#include <memory>

#include "dispatch/job.h"

namespace manypy::dispatch {

// Queues `job` for a host worker. Its stop covers its time in the queue
// (stopped there, it completes at once without running); while it runs,
// TorchScript checks the stop itself, before each operator
// (script_stop.h). Throws only when no worker can be started.
void run_on_host_worker(std::shared_ptr<Job> job);

}  // namespace manypy::dispatch
