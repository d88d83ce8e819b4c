// Asynchronous calls' completions, from the core's outcome to the caller's
// manypy_call_done_fn.
#include "handles.h"

namespace manypy::capi {

dispatch::Done completion_of(manypy_call_done_fn done, void* user_data) {
  return [done, user_data](Value* value, Error* error) {
    manypy_value* result = nullptr;
    manypy_status* status = nullptr;
    if (value != nullptr) {
      try {
        result = new_value(std::move(*value));
      } catch (...) {
        status = make_status(MANYPY_ERR_RESOURCE_EXHAUSTED, "out of memory for the call's result");
      }
    } else {
      status = make_status(static_cast<manypy_code>(error->code()), error->message(),
                           error->python_type(), error->traceback());
    }
    done(user_data, result, status);
  };
}

}  // namespace manypy::capi
