// Operator callbacks through the C API: core events become manypy_op_events.
#include <memory>
#include <vector>

#include "handles.h"
#include "runtime.h"

namespace {

// The caller's callbacks and data; destroyed (running free_user_data) when
// the registration's handler is.
struct Callbacks {
  manypy_op_callback_fn enter, exit;
  void* user_data;
  void (*free_user_data)(void*);
  ~Callbacks() {
    if (free_user_data) free_user_data(user_data);
  }
};

void deliver(const Callbacks& cb, int phase, const mph_op_event& e) {
  manypy_op_callback_fn fn = phase == 0 ? cb.enter : cb.exit;
  if (fn == nullptr) return;
  std::vector<manypy_op_input> inputs(e.num_inputs);
  for (size_t k = 0; k < e.num_inputs; ++k) {
    const mph_op_input& in = e.inputs[k];
    inputs[k].struct_size = sizeof(manypy_op_input);
    inputs[k].kind = in.kind;
    inputs[k].dtype = DLDataType{in.dtype_code, in.dtype_bits, in.dtype_lanes};
    inputs[k].ndim = in.ndim;
    inputs[k].shape = in.shape;
  }
  manypy_op_event event{};
  event.struct_size = sizeof(manypy_op_event);
  event.name = e.name;
  event.sequence_number = e.sequence_number;
  event.thread_id = e.thread_id;
  event.interpreter = e.interpreter;
  event.start_ns = e.start_ns;
  event.end_ns = e.end_ns;
  event.model_id = e.model_id;
  event.request_id = e.request_id;
  event.num_inputs = inputs.size();
  event.inputs = inputs.empty() ? nullptr : inputs.data();
  fn(&event, cb.user_data);
}

}  // namespace

extern "C" {

manypy_status* manypy_add_op_callbacks(manypy_op_callback_fn enter, manypy_op_callback_fn exit,
                                       void* user_data, void (*free_user_data)(void*),
                                       double sampling_probability, int needs_inputs,
                                       uint64_t* out_id) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    std::shared_ptr<Callbacks> callbacks;
    try {
      // Owned from here on: freed with the handler, or here if anything fails.
      // Built in place: a temporary Callbacks would free the user data.
      callbacks.reset(new Callbacks{enter, exit, user_data, free_user_data});
    } catch (...) {
      if (free_user_data) free_user_data(user_data);
      throw;
    }
    MANYPY_NOT_NULL(out_id);
    if (needs_inputs != 0 && needs_inputs != 1) {
      return manypy::capi::invalid_argument(api_function, "needs_inputs must be 0 or 1");
    }
    manypy::OperatorCallbacks::Options options;
    options.sampling_probability = sampling_probability;
    options.needs_inputs = needs_inputs != 0;
    *out_id = manypy::Runtime::get().operator_callbacks().add(
        [callbacks](int phase, const mph_op_event& e) { deliver(*callbacks, phase, e); }, options);
    return nullptr;
  });
}

manypy_status* manypy_remove_op_callbacks(uint64_t id) {
  return manypy::capi::fence(__func__, [&](const char*) -> manypy_status* {
    manypy::Runtime::get().operator_callbacks().remove(id);
    return nullptr;
  });
}

manypy_status* manypy_call_options_set_context(manypy_call_options* options, const char* model_id,
                                               const char* request_id) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    MANYPY_UTF8(model_id);
    MANYPY_UTF8(request_id);
    options->options.model_id = model_id ? model_id : "";
    options->options.request_id = request_id ? request_id : "";
    return nullptr;
  });
}

}  // extern "C"
