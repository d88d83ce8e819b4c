// Dynamic batching over one method of a replicated object, as TorchServe's
// and Triton's: concurrent requests that can share a batch are
// concatenated along the batch dimension, run as one call, and the result
// is split back to them (batch_values.h). manypy.h, "Dynamic batching",
// states the rules.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "call_options.h"
#include "dispatch/job.h"
#include "replicated_object.h"

namespace manypy {

struct BatcherOptions {
  size_t max_batch = 8;             // rows
  int64_t max_wait_ns = 2'000'000;  // for a batch to fill, from its first request
  int batch_dim = 0;
  std::string name;  // in metrics; "": the method's
};

class Batcher {
 public:
  // `method` nullptr: the object itself.
  Batcher(std::shared_ptr<ReplicatedObject> object, const std::string* method,
          BatcherOptions options);
  // Sends the requests still waiting for their batch to fill, and stops the
  // batcher's thread. Batches in flight complete as usual.
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // One request, waiting for its result. Throws Error.
  Value call(const CallOptions& options, const Value* args, const Value* kwargs);
  // One request: `done` gets its outcome exactly once, on a thread of
  // manypy's. Throws Error if the request is refused (arguments the batcher
  // cannot split, a stop already set, an overloaded pool); `done` then
  // never runs.
  void call_async(const CallOptions& options, const Value* args, const Value* kwargs,
                  dispatch::Done done);

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;  // forms batches when they are due (State::run)
};

}  // namespace manypy
