#include "batch_sizes.h"

#include <array>
#include <map>
#include <mutex>

#include "prometheus_text.h"

namespace manypy {

namespace {

// Upper bounds of the buckets, in rows: powers of two up to the largest
// batch allowed (manypy_batcher_options_set_max_batch).
constexpr std::array<int64_t, 17> kBounds = {1,   2,    4,    8,    16,   32,    64,    128,  256,
                                             512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};

struct Histogram {
  // Not cumulative; the last: larger than every bound (a request alone may
  // bring more rows than the largest batch), counted only in +Inf.
  std::array<uint64_t, kBounds.size() + 1> buckets{};
  uint64_t count = 0;
  int64_t sum = 0;
};

std::mutex g_mu;
std::map<std::string, Histogram>& histograms() {
  static auto* all = new std::map<std::string, Histogram>();  // process lifetime
  return *all;
}

}  // namespace

BatchSizes& BatchSizes::get() {
  static BatchSizes sizes;
  return sizes;
}

void BatchSizes::record(const std::string& name, int64_t rows) {
  std::lock_guard<std::mutex> lock(g_mu);
  Histogram& h = histograms()[name];
  size_t k = 0;
  while (k < kBounds.size() && rows > kBounds[k]) ++k;
  ++h.buckets[k];
  ++h.count;
  h.sum += rows;
}

std::string BatchSizes::prometheus_text() const {
  std::lock_guard<std::mutex> lock(g_mu);
  if (histograms().empty()) return "";
  std::string out =
      "# HELP manypy_batch_size Rows in each batch a dynamic batcher ran, by batcher.\n"
      "# TYPE manypy_batch_size histogram\n";
  for (const auto& [name, h] : histograms()) {
    const std::string batcher = "batcher=\"" + prometheus_label(name) + "\"";
    uint64_t cumulative = 0;
    for (size_t k = 0; k < kBounds.size(); ++k) {
      cumulative += h.buckets[k];
      out += "manypy_batch_size_bucket{" + batcher + ",le=\"" + std::to_string(kBounds[k]) +
             "\"} " + std::to_string(cumulative) + "\n";
    }
    out +=
        "manypy_batch_size_bucket{" + batcher + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
    out += "manypy_batch_size_sum{" + batcher + "} " + std::to_string(h.sum) + "\n";
    out += "manypy_batch_size_count{" + batcher + "} " + std::to_string(h.count) + "\n";
  }
  return out;
}

}  // namespace manypy
