// A pool's members: the interpreters it leased from the process-wide set,
// each brought up on its home thread (started if fresh, joined to the
// process's operator libraries and callbacks, its lease begun), in the
// background or not; the pool's growth, by hand (resize) or on long waits;
// and giving them back. The chooser (dispatch/chooser.h) learns each
// member's state from here.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "archive_trust.h"
#include "dispatch/chooser.h"
#include "dispatch/lane.h"
#include "interpreter.h"
#include "interpreter_set.h"

namespace manypy {

class PoolMembers {
 public:
  struct Settings {
    LeaseSettings lease;
    ArchiveTrust trust;
    size_t max = 1;  // the most members growth on long waits reaches
    int64_t grow_after_ns = 20 * 1000 * 1000;
    // Told of a member that failed to come up in the background, on a
    // thread of manypy's. Must not throw.
    std::function<void(int index, const Error& why)> on_failed;
  };

  PoolMembers(dispatch::Chooser& chooser, Settings settings);
  PoolMembers(const PoolMembers&) = delete;
  PoolMembers& operator=(const PoolMembers&) = delete;
  // close(), then gives every member back. No call may hold load.
  ~PoolMembers();

  // No growth starts after it; waits for growth under way. Idempotent.
  void close() noexcept;

  // How long grow() waits: until one member of the pool is up (the others
  // come up in the background), or until every new member came up or
  // failed to.
  enum class Wait { kFirst, kAll };
  // Grows the pool to `n` members. Throws Error: the lease's (kOutOfRange,
  // kResourceExhausted naming the process's limit); with kAll, the first
  // new member's failure to come up (the member stays, broken); with
  // kFirst, the first failure when no member of the pool comes up.
  // `background`: a growth of the pool's own, whose failures go to
  // on_failed.
  void grow(size_t n, Wait wait, bool background = false);
  // resize(): grows (kAll) or shrinks to `n`, 1 to the process's limit.
  void resize(size_t n);
  // The chooser's wait observer: a call waited `waited_ns` for its
  // interpreter. Past the threshold, grows by one in the background, up
  // to the maximum.
  void on_wait(int64_t waited_ns);

  // The chooser's retire observer: member `index`'s interpreter was
  // retired. Replaces it with another interpreter of the process's (an idle
  // one this pool trusts, or a new one while the process has room: retired
  // interpreters keep their namespaces, docs/serving.md), in the same slot,
  // so that the pool keeps its size: at once on this thread when no other
  // membership change is under way (the new member then starts in the
  // background), else on the pool's maintenance thread. Without room, that
  // thread tries again each second, and the pool says so (no_room(), and
  // the errors of calls no member can serve). Members that failed to start
  // are not replaced: a start that failed would fail again. Never throws.
  void on_retired(size_t index) noexcept;
  // Interpreters replaced since the pool was created.
  uint64_t replaced() const;
  // Whether a retired member waits for a replacement the process has no
  // room for.
  bool no_room() const;

  // The members' interpreters, and the lane of one of them (nullptr if
  // `interp` is no member). Thread safe.
  std::vector<Interpreter*> interpreters() const;
  std::vector<dispatch::Lane*> lanes() const;
  dispatch::Lane* lane_of(const Interpreter& interp) const;

 private:
  class BringUp;

  // The new member `index` came up (error nullptr) or failed to.
  void settled(size_t index, const Error* error) noexcept;
  void shrink(size_t n);
  // Runs `fn` on a thread of the members', joined by close().
  void in_background(std::function<void()> fn);
  // The maintenance thread's loop, until close: one member more each time
  // on_wait asks, and the replacements on_retired could not make at once.
  void maintain() noexcept;
  // Starts the maintenance thread unless it runs, and wakes it. Under mu_.
  void wake_maintainer();
  // Replaces member `index` if it is still a retired member. False if the
  // process had no interpreter to give (then try again later). Under
  // resize_mu_, never mu_.
  bool replace(size_t index) noexcept;
  // Replaces every member waiting for it; false if one is still waiting.
  bool replace_waiting() noexcept;

  dispatch::Chooser& chooser_;
  const Settings settings_;
  std::mutex resize_mu_;  // one membership change at a time

  mutable std::mutex mu_;  // guards what follows
  std::condition_variable settled_cv_;
  std::vector<dispatch::Lane*> lanes_;          // by index; members are [0, chooser_.size())
  std::vector<bool> up_or_failed_;              // by index: settled since it joined
  std::vector<std::optional<Error>> failures_;  // by index
  std::vector<bool> in_background_;             // by index: report a failure to on_failed
  std::vector<std::thread> threads_;            // background starts (one per grow with kFirst)
  bool closing_ = false;
  // Growth on long waits and replacements that must wait: one thread for
  // the pool's life, made at the first need, so that a pool waiting at the
  // process's limit does not make a thread per attempt.
  std::thread grower_;
  std::condition_variable grow_cv_;   // grow_wanted_, a replacement or closing_
  bool grow_wanted_ = false;          // set by on_wait, cleared once grown (or failed)
  int64_t next_growth_ns_ = 0;        // no growth before (after a failed lease)
  std::vector<bool> replace_wanted_;  // by index: retired, not yet replaced
  bool replacing_ = false;            // some replace_wanted_ is set
  int64_t next_replace_ns_ = 0;       // no replacement try before (after no room)
  uint64_t replaced_ = 0;
  bool no_room_ = false;
};

}  // namespace manypy
