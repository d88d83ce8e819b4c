/*
 * libmanypy_interp.so: the library manypy loads first into each interpreter's
 * link-map namespace. It links only libpython and libc, so that nothing that
 * creates pthread keys in a constructor is loaded before the host has fenced
 * the namespace's keys into their band (docs/isolation.md).
 *
 * Every entry here runs on a host thread that the host side has prepared for
 * this namespace (ctype tables, key blocks). Each entry takes this
 * interpreter's GIL for itself and releases it before returning.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "calls.h"
#include "convert.h"
#include "exports.h"
#include "hooks_api.h"
#include "results.h"
#include "stack_guard.h"
#include "stop.h"

#define EXPORT __attribute__((visibility("default")))

extern const char manypy_runtime_py[]; /* runtime.py, generated at build */

static PyObject* g_globals;          /* the current lease's globals dict */
static PyThreadState* g_main_thread; /* the thread that ran start() */

/* ---- start -------------------------------------------------------------- */

static int load_runtime(const mpi_sink* sink) {
  PyObject* code = Py_CompileString(manypy_runtime_py, "<manypy runtime>", Py_file_input);
  if (code == NULL) return mpi_report_python_error(sink);
  PyObject* module = PyImport_ExecCodeModule("_manypy_runtime", code);
  Py_DECREF(code);
  if (module == NULL) return mpi_report_python_error(sink);
  mpi_runtime = module;
  return MPI_OK;
}

/* Runs runtime.<name>() once at start. */
static int run_runtime_step(const char* name, const mpi_sink* sink) {
  PyObject* r = PyObject_CallMethod(mpi_runtime, name, NULL);
  int rc = r != NULL ? MPI_OK : mpi_report_python_error(sink);
  Py_XDECREF(r);
  return rc;
}

/* Importing Python's signal module installs a C handler for SIGINT when the
 * process has the default one, even with install_signal_handlers = 0. Import
 * it now, under the host's process-wide lock (interpreters start in parallel
 * and would otherwise see each other's handler), and put back exactly what
 * the host had. */
static int leave_signals_to_host(const mpi_start_options* options, const mpi_sink* sink) {
  options->process_lock(1);
  struct sigaction host_sigint;
  sigaction(SIGINT, NULL, &host_sigint);
  PyObject* r = PyObject_CallMethod(mpi_runtime, "leave_signals_to_host", "i",
                                    host_sigint.sa_handler == SIG_DFL);
  int rc = r != NULL ? MPI_OK : mpi_report_python_error(sink);
  Py_XDECREF(r);
  sigaction(SIGINT, &host_sigint, NULL);
  options->process_lock(0);
  return rc;
}

/* Loads libmanypy_hooks.so into this namespace (dlopen from code in a
 * namespace loads into that namespace) and installs the hooks that must see
 * everything torch does, before torch is imported. */
static int install_hooks(const mpi_start_options* options, const mpi_sink* sink) {
  void* handle = dlopen(options->hooks_library, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char* why = dlerror();
    char message[1024];
    snprintf(message, sizeof message, "cannot load %s: %s", options->hooks_library,
             why ? why : "unknown error");
    int code = why && strstr(why, "static TLS") ? MPI_ERR_STATIC_TLS : MPI_ERR_LOADER;
    mpi_report(sink, code, "", message, "");
    return code;
  }
  manypy_hooks_get_api_fn get_api = (manypy_hooks_get_api_fn)dlsym(handle, "manypy_hooks_get_api");
  const manypy_hooks_api* hooks = get_api ? get_api(MANYPY_HOOKS_API_VERSION) : NULL;
  if (hooks == NULL || hooks->size < sizeof(manypy_hooks_api)) {
    mpi_report(sink, MPI_ERR_LOADER, "", "the hooks library does not speak this version", "");
    return MPI_ERR_LOADER;
  }
  mpi_hooks = hooks;
  hooks->set_api_usage_logger(options->host->api_usage);
  hooks->set_export_files(options->host->export_files);
  return MPI_OK;
}

/* Where Python finds its library and packages. A plain prefix (Debian's
 * /usr) is PyConfig.home. A virtual environment (a pyvenv.cfg in it: the
 * torch 2.x leg's, scripts/setup_torch2.sh) has no standard library of its
 * own, so Python starts as the venv's bin/python3 instead: getpath then
 * reads pyvenv.cfg exactly as for a command-line python, finds the base
 * prefix's library, and site adds the venv's site-packages. */
static PyStatus set_python_home(PyConfig* config, const char* home) {
  if (home == NULL || home[0] == '\0') return PyStatus_Ok();
  char path[PATH_MAX];
  int n = snprintf(path, sizeof path, "%s/pyvenv.cfg", home);
  if (n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0) {
    snprintf(path, sizeof path, "%s/bin/python3", home);
    return PyConfig_SetBytesString(config, &config->program_name, path);
  }
  return PyConfig_SetBytesString(config, &config->home, home);
}

/* `import torch` failed. A Python without torch is the commonest broken
 * install (python3-torch removed, a virtual environment moved or deleted),
 * so an ImportError says which Python it was and what to do. */
static int report_torch_failure(const mpi_sink* sink) {
  if (!PyErr_ExceptionMatches(PyExc_ImportError)) return mpi_report_python_error(sink);
  mpi_error e;
  mpi_error_capture(&e);
  PyObject* prefix = PySys_GetObject("prefix"); /* borrowed */
  const char* home = prefix && PyUnicode_Check(prefix) ? PyUnicode_AsUTF8(prefix) : NULL;
  if (home == NULL) PyErr_Clear();
  char message[1024];
  snprintf(message, sizeof message,
           "the Python at %s cannot import torch (%s): install torch there (on Debian: "
           "apt-get install python3-torch), or set MANYPY_PYTHON_HOME to the sys.prefix of a "
           "Python environment that has the torch manypy was built with",
           home ? home : "(unknown)", e.message ? e.message : "ImportError");
  return mpi_error_report(&e, sink, -1, message);
}

static int start(const mpi_start_options* options, const mpi_sink* sink) {
  if (Py_IsInitialized()) {
    mpi_report(sink, MPI_ERR_INTERNAL, "", "interpreter already started", "");
    return MPI_ERR_INTERNAL;
  }
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  /* The host (a JVM, the Go runtime) owns the process's signals. */
  config.install_signal_handlers = 0;
  config.parse_argv = 0;
  /* Unbuffered stdio, so model output is never lost in a buffer that no
   * interpreter shutdown will flush. */
  config.buffered_stdio = 0;
  PyStatus status = set_python_home(&config, options->python_home);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    char message[512];
    snprintf(message, sizeof message, "Python failed to start: %s%s%s",
             status.func ? status.func : "", status.func ? ": " : "",
             status.err_msg ? status.err_msg : "unknown error");
    mpi_report(sink, MPI_ERR_LOADER, "", message, "");
    return MPI_ERR_LOADER;
  }
  g_main_thread = PyThreadState_Get();
  mpi_host = options->host;

  int rc = load_runtime(sink);
  if (rc == MPI_OK && mpi_init_stops() != 0) rc = mpi_report_python_error(sink);
  if (rc == MPI_OK) rc = run_runtime_step("guard_process_exit", sink);
  if (rc == MPI_OK) rc = run_runtime_step("forbid_global_dlopen", sink);
  if (rc == MPI_OK) rc = run_runtime_step("point_ctypes_at_this_libpython", sink);
  if (rc == MPI_OK) rc = leave_signals_to_host(options, sink);
  if (rc == MPI_OK) rc = run_runtime_step("guard_signal_handlers", sink);
  if (rc == MPI_OK) rc = run_runtime_step("keep_process_state_to_host", sink);
  if (rc == MPI_OK) rc = mpi_install_stack_guard(sink);
  if (rc == MPI_OK) rc = run_runtime_step("guard_switch_interval", sink);
  if (rc == MPI_OK) rc = run_runtime_step("leave_main_thread_to_host", sink);
  if (rc == MPI_OK) rc = run_runtime_step("main_thread_in_forked_children", sink);
  if (rc == MPI_OK && pthread_atfork(NULL, NULL, mpi_note_forked_child) != 0) {
    mpi_report(sink, MPI_ERR_RESOURCE_EXHAUSTED, "", "pthread_atfork failed", "");
    rc = MPI_ERR_RESOURCE_EXHAUSTED;
  }
  if (rc == MPI_OK && options->hooks_library != NULL) rc = install_hooks(options, sink);
  if (rc == MPI_OK && options->import_torch) {
    if (mpi_init_tensors() != 0) rc = report_torch_failure(sink);
    if (rc == MPI_OK) rc = mpi_install_export_files(sink);
  }

  mpi_leave();
  return rc;
}

/* ---- leases ------------------------------------------------------------- */

static int lease_begin(const mpi_lease_options* options, const mpi_sink* sink) {
  mpi_enter();
  int rc = MPI_OK;
  PyObject* paths = PyList_New(0);
  for (size_t i = 0; paths != NULL && i < options->extra_sys_path_count; i++) {
    PyObject* p = PyUnicode_DecodeFSDefault(options->extra_sys_path[i]);
    if (p == NULL || PyList_Append(paths, p) != 0) Py_CLEAR(paths);
    Py_XDECREF(p);
  }
  PyObject* globals =
      paths ? PyObject_CallMethod(mpi_runtime, "lease_begin", "Oii", paths,
                                  options->intra_op_threads, options->allow_process_exit)
            : NULL;
  Py_XDECREF(paths);
  if (globals == NULL) {
    rc = mpi_report_python_error(sink);
  } else {
    Py_XSETREF(g_globals, globals);
    mpi_new_threads_generation(); /* applied on this thread just above */
  }
  mpi_leave();
  return rc;
}

static int lease_end(const mpi_sink* sink) {
  mpi_enter();
  int rc = MPI_OK;
  PyObject* r = PyObject_CallMethod(mpi_runtime, "lease_end", "O", g_globals ? g_globals : Py_None);
  if (r == NULL) rc = mpi_report_python_error(sink);
  Py_XDECREF(r);
  Py_CLEAR(g_globals);
  mpi_leave();
  return rc;
}

/* ---- code --------------------------------------------------------------- */

/* Code runs only inside a lease, whose globals lease_begin made. */
static int require_lease(const mpi_sink* sink) {
  if (g_globals != NULL) return MPI_OK;
  mpi_report(sink, MPI_ERR_INTERNAL, "", "no lease: the interpreter is not in a pool", "");
  return MPI_ERR_INTERNAL;
}

/* Compiles and runs `source` in the lease's globals: statements
 * (Py_file_input, result discarded) or one expression (Py_eval_input, its
 * value delivered to the sink), in the caller's context, bounded by
 * `control` (NULL: unbounded) as an object call is: compiling, running,
 * and preparing the value or describing the error all run under its stop. */
static int run_source(const char* source, int start, const char* model_id, const char* request_id,
                      mpi_call_control* control, const mpi_sink* sink) {
  mpi_enter();
  int rc = require_lease(sink);
  if (rc == MPI_OK) rc = mpi_call_begin(control, sink);
  if (rc == MPI_OK) {
    int pushed = mpi_context_push(model_id, request_id);
    PyObject* code = Py_CompileString(source, "<manypy>", start);
    PyObject* result = code ? PyEval_EvalCode(code, g_globals, g_globals) : NULL;
    mpi_context_pop(pushed);
    mpi_outcome o;
    mpi_outcome_take(&o, result, start == Py_eval_input);
    Py_XDECREF(code);
    rc = mpi_outcome_finish(&o, control, sink);
  }
  mpi_leave();
  return rc;
}

static int exec_source(const char* source, const char* model_id, const char* request_id,
                       mpi_call_control* control, const mpi_sink* sink) {
  return run_source(source, Py_file_input, model_id, request_id, control, sink);
}

static int eval_expression(const char* expression, const char* model_id, const char* request_id,
                           mpi_call_control* control, const mpi_sink* sink) {
  return run_source(expression, Py_eval_input, model_id, request_id, control, sink);
}

/* ---- operator libraries ------------------------------------------------ */

static int load_library(const char* path, const mpi_sink* sink) {
  mpi_enter();
  PyObject* r = PyObject_CallMethod(mpi_runtime, "load_operator_library", "s", path);
  int rc = r ? MPI_OK : mpi_report_python_error_as(sink, MPI_ERR_LOADER);
  Py_XDECREF(r);
  mpi_leave();
  return rc;
}

/* ---- operator callbacks -------------------------------------------------- */

static int add_op_callbacks(uint64_t id, double prob, int needs_inputs, int32_t interpreter,
                            void (*emit)(uint64_t, int, const void*)) {
  if (mpi_hooks == NULL) return MPI_ERR_LOADER;
  return mpi_hooks->add_op_callbacks(id, prob, needs_inputs, interpreter, (mph_emit_fn)emit) == 0
             ? MPI_OK
             : MPI_ERR_RESOURCE_EXHAUSTED;
}

static void remove_op_callbacks(uint64_t id) {
  if (mpi_hooks != NULL) mpi_hooks->remove_op_callbacks(id);
}

/* ---- threads ------------------------------------------------------------ */

static void thread_exit(void) {
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (ts == NULL || ts == g_main_thread) return;
  PyEval_RestoreThread(ts);
  /* The counter is 1 (set by the first PyGILState_Ensure): this clears and
   * deletes the thread state and releases the GIL. */
  PyGILState_Release(PyGILState_UNLOCKED);
}

/* ---- the table ---------------------------------------------------------- */

/* objects.c */
int mpi_package_open(uint64_t package_id, const void* data, size_t size, mpi_call_control* control,
                     const mpi_sink* sink);
void mpi_package_close(uint64_t package_id);
int mpi_object_load(uint64_t object_id, uint64_t package_id, const char* module, const char* name,
                    mpi_call_control* control, const mpi_sink* sink);
void mpi_object_drop(uint64_t object_id);
int mpi_object_call(uint64_t object_id, const char* method, const mpi_value* args,
                    const mpi_value* kwargs, const char* model_id, const char* request_id,
                    mpi_call_control* control, const mpi_sink* sink);
int mpi_object_getattr(uint64_t object_id, const char* name, mpi_call_control* control,
                       const mpi_sink* sink);
int mpi_object_hasattr(uint64_t object_id, const char* name, int* out_has, const mpi_sink* sink);

static const manypy_interp_api kApi = {
    .version = MANYPY_INTERP_API_VERSION,
    .size = sizeof(manypy_interp_api),
    .start = start,
    .lease_begin = lease_begin,
    .lease_end = lease_end,
    .exec = exec_source,
    .eval = eval_expression,
    .package_open = mpi_package_open,
    .package_close = mpi_package_close,
    .object_load = mpi_object_load,
    .object_drop = mpi_object_drop,
    .object_call = mpi_object_call,
    .object_getattr = mpi_object_getattr,
    .object_hasattr = mpi_object_hasattr,
    .load_library = load_library,
    .add_op_callbacks = add_op_callbacks,
    .remove_op_callbacks = remove_op_callbacks,
    .interrupt = mpi_interrupt,
    .thread_exit = thread_exit,
    .escalate = mpi_escalate,
};

EXPORT const manypy_interp_api* manypy_interp_get_api(uint32_t version) {
  return version == MANYPY_INTERP_API_VERSION ? &kApi : NULL;
}
