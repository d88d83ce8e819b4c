// What a caller says about one call: where it runs, the context its operator
// callbacks report, and what bounds it.
#pragma once

#include <string>

#include "call_stop.h"

namespace manypy {

struct CallOptions {
  int interpreter = -1;  // Pool::kAnyInterpreter
  // Reported to operator callbacks for every operator the call runs.
  std::string model_id;
  std::string request_id;
  CallLimits limits;
};

}  // namespace manypy
