// A vector whose elements never move. The C API hands out pointers to a
// container value's items and to its dict keys (manypy_value_get_item,
// manypy_value_dict_key), and they must stay valid while the container
// grows. Each element lives in its own allocation; the vector itself holds
// pointers, so an empty one allocates nothing (unlike std::deque, whose
// empty state allocates, which showed in the cost of every call).
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace manypy {

template <typename T>
class StableVector {
  using Slots = std::vector<std::unique_ptr<T>>;

  // Iterates over the elements, not the pointers.
  template <typename Elem, typename SlotIt>
  class Iter {
   public:
    explicit Iter(SlotIt it) : it_(it) {}
    Elem& operator*() const { return **it_; }
    Elem* operator->() const { return it_->get(); }
    Iter& operator++() {
      ++it_;
      return *this;
    }
    bool operator!=(const Iter& other) const { return it_ != other.it_; }
    bool operator==(const Iter& other) const { return it_ == other.it_; }

   private:
    SlotIt it_;
  };

 public:
  using iterator = Iter<T, typename Slots::iterator>;
  using const_iterator = Iter<const T, typename Slots::const_iterator>;

  StableVector() = default;
  StableVector(StableVector&&) noexcept = default;
  StableVector& operator=(StableVector&&) noexcept = default;
  StableVector(const StableVector& other) {
    slots_.reserve(other.size());
    for (const T& item : other) push_back(item);
  }
  StableVector& operator=(const StableVector& other) {
    if (this != &other) *this = StableVector(other);
    return *this;
  }

  size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }
  T& operator[](size_t i) { return *slots_[i]; }
  const T& operator[](size_t i) const { return *slots_[i]; }
  T& back() { return *slots_.back(); }

  template <typename... Args>
  T& emplace_back(Args&&... args) {
    slots_.push_back(std::make_unique<T>(std::forward<Args>(args)...));
    return *slots_.back();
  }
  T& push_back(T item) { return emplace_back(std::move(item)); }

  // Moves every element's allocation to the end of `out`, leaving this
  // empty: how a value tree is freed without recursion.
  void move_into(std::vector<std::unique_ptr<T>>& out) {
    for (auto& slot : slots_) out.push_back(std::move(slot));
    slots_.clear();
  }

  iterator begin() { return iterator(slots_.begin()); }
  iterator end() { return iterator(slots_.end()); }
  const_iterator begin() const { return const_iterator(slots_.begin()); }
  const_iterator end() const { return const_iterator(slots_.end()); }

 private:
  Slots slots_;
};

}  // namespace manypy
