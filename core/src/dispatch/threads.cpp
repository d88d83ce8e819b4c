#include "dispatch/threads.h"

namespace manypy::dispatch {

namespace {
thread_local ThreadKind t_kind = ThreadKind::kHost;
}  // namespace

ThreadKind this_thread_kind() { return t_kind; }

void set_this_thread_kind(ThreadKind kind) { t_kind = kind; }

}  // namespace manypy::dispatch
