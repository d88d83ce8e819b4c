// Pieces of the Prometheus text exposition format shared by the metrics the
// core writes (profiler.h, batch_sizes.h).
#pragma once

#include <string>

namespace manypy {

// A label value: \, " and newline escaped.
inline std::string prometheus_label(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace manypy
