#include "dispatch/threads.h"

#include <pthread.h>

#include <exception>
#include <memory>
#include <system_error>

namespace manypy::dispatch {

namespace {
thread_local ThreadKind t_kind = ThreadKind::kHost;

void* run_body(void* arg) {
  std::unique_ptr<std::function<void()>> body(static_cast<std::function<void()>*>(arg));
  try {
    (*body)();
  } catch (...) {
    std::terminate();  // as an exception leaving a std::thread's function does
  }
  return nullptr;
}
}  // namespace

ThreadKind this_thread_kind() { return t_kind; }

void set_this_thread_kind(ThreadKind kind) { t_kind = kind; }

void start_detached(std::function<void()> body) {
  auto owned = std::make_unique<std::function<void()>>(std::move(body));
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) rc = pthread_attr_setstacksize(&attr, kThreadStackBytes);
  if (rc == 0) rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  if (rc == 0) rc = pthread_create(&thread, &attr, run_body, owned.get());
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_create");
  owned.release();  // run_body owns it now
}

}  // namespace manypy::dispatch
