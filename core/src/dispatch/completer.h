// The completion thread: one per process, started at its first use. It
// completes the calls that stop while they wait for an interpreter (the
// watchdog that sees the stop must not run a caller's callback under its
// lock), and frees what must not be freed on the thread that let go of it
// (see ReplicatedObject's deleter).
#pragma once

#include <functional>

namespace manypy::dispatch {

// Runs `task` on the completion thread, after the tasks posted before it.
// Never throws (a task that cannot be queued for want of memory runs here).
// A task must not throw.
void complete_later(std::function<void()> task) noexcept;

}  // namespace manypy::dispatch
