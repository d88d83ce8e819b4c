#include "interpreter_set.h"

#include "isolation/key_bands.h"

namespace manypy {

InterpreterSet& InterpreterSet::instance() {
  // Never destroyed: the interpreters outlive every static destructor.
  static InterpreterSet* set = new InterpreterSet();
  return *set;
}

size_t InterpreterSet::capacity() const {
  return isolation::KeyBands::instance().usable_bands();
}

std::vector<Interpreter*> InterpreterSet::lease(size_t count, const LeaseSettings& settings) {
  const size_t limit = capacity();
  if (count == 0 || count > limit) {
    throw Error(Code::kOutOfRange, "a pool needs 1 to " + std::to_string(limit) +
                                       " interpreters on this platform, not " +
                                       std::to_string(count));
  }
  std::vector<Interpreter*> chosen;
  std::vector<Interpreter*> started;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < all_.size() && chosen.size() < count; ++i) {
      if (idle_[i] && !all_[i]->broken()) {
        idle_[i] = false;
        chosen.push_back(all_[i].get());
      }
    }
    size_t missing = count - chosen.size();
    if (all_.size() + missing > limit) {
      size_t broken = 0;
      for (const auto& interp : all_) broken += interp->broken() ? 1 : 0;
      const size_t leased = all_.size() - broken - chosen.size();
      for (Interpreter* interp : chosen) idle_[interp->slot()] = true;
      throw Error(Code::kResourceExhausted,
                  "cannot start " + std::to_string(missing) + " more interpreter(s): of this "
                  "process's " + std::to_string(limit) + ", " + std::to_string(leased) +
                  " are leased to other pools" +
                  (broken ? " and " + std::to_string(broken) + " failed to start" : std::string()));
    }
    // Start the missing ones in parallel: the dynamic loader serializes the
    // library loads, but Python's own start and import work overlap.
    isolation::KeyBands& bands = isolation::KeyBands::instance();
    for (size_t k = 0; k < missing; ++k) {
      unsigned slot = static_cast<unsigned>(all_.size());
      all_.push_back(std::make_unique<Interpreter>(slot, bands.band_of_slot(slot)));
      idle_.push_back(false);
      all_.back()->begin_start();
      started.push_back(all_.back().get());
    }
  }

  std::optional<Error> failure;
  for (Interpreter* interp : started) {
    try {
      interp->wait_started();
      chosen.push_back(interp);
    } catch (const Error& e) {
      if (!failure) failure = e.prefixed("interpreter " + std::to_string(interp->slot()) + ": ");
    }
  }
  std::vector<Interpreter*> begun;
  if (!failure) {
    for (Interpreter* interp : chosen) {
      try {
        interp->lease_begin(settings);
        begun.push_back(interp);
      } catch (const Error& e) {
        failure = e.prefixed("interpreter " + std::to_string(interp->slot()) + ": ");
        break;
      }
    }
  }
  if (failure) {
    give_back(begun);
    std::lock_guard<std::mutex> lock(mu_);
    for (Interpreter* interp : chosen) idle_[interp->slot()] = true;
    throw *failure;
  }
  return chosen;
}

void InterpreterSet::give_back(const std::vector<Interpreter*>& interpreters) noexcept {
  for (Interpreter* interp : interpreters) {
    bool clean = true;
    try {
      interp->lease_end();
    } catch (...) {
      // An interpreter that cannot be cleaned is not handed to another pool.
      clean = false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (clean) idle_[interp->slot()] = true;
  }
}

}  // namespace manypy
