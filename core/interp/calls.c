/* What every call into model code shares, whatever it runs (an object's
 * method, or source from the pool's exec and eval): the caller's context
 * for operator callbacks, and its outcome, held until the call is over
 * because what reaches the host is decided only then (stop.c). */
#include "calls.h"

#include <string.h>

#include "hooks_api.h"

int mpi_context_push(const char* model_id, const char* request_id) {
  if (mpi_hooks == NULL || (model_id == NULL && request_id == NULL)) return 0;
  mpi_hooks->push_context(model_id, request_id);
  return 1;
}

void mpi_context_pop(int pushed) {
  if (pushed) mpi_hooks->pop_context();
}

void mpi_outcome_take(mpi_outcome* o, PyObject* returned, int want) {
  memset(o, 0, sizeof *o);
  if (returned == NULL) {
    mpi_capture_call_error(&o->error);
    return;
  }
  if (want && (o->result = mpi_result_prepare(returned)) == NULL) {
    mpi_error_capture(&o->error); /* prepare fails only when memory is exhausted */
    o->error.code = MPI_ERR_RESOURCE_EXHAUSTED;
  }
  Py_DECREF(returned);
}

int mpi_outcome_finish(mpi_outcome* o, mpi_call_control* control, const mpi_sink* sink) {
  if (o->result != NULL) mpi_result_own_tensors(o->result);
  int stop = mpi_call_end(control);
  if (stop != 0) {
    mpi_result_discard(o->result);
    return mpi_report_stop(stop, &o->error, sink);
  }
  if (o->result != NULL) return mpi_result_send(o->result, sink);
  if (o->error.captured) return mpi_error_report(&o->error, sink, -1, NULL);
  return MPI_OK;
}
