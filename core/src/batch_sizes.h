// The sizes of the batches that dynamic batchers form (batcher.h), per
// batcher name, as a Prometheus histogram in the profiler's output
// (manypy_batch_size). Process-wide: a series outlives its batchers, as a
// Prometheus counter must.
#pragma once

#include <cstdint>
#include <string>

namespace manypy {

class BatchSizes {
 public:
  static BatchSizes& get();
  // One batch of `rows` rows formed by batcher `name`. Thread safe.
  void record(const std::string& name, int64_t rows);
  // "" when no batch was formed yet.
  std::string prometheus_text() const;

 private:
  BatchSizes() = default;
};

}  // namespace manypy
