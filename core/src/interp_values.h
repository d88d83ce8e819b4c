// Values across the interpreter boundary: host Value trees as mpi_value
// arguments, and sink callbacks back into Value trees.
#pragma once

#include <optional>
#include <vector>

#include "error.h"
#include "interp_api.h"
#include "isolation/namespace.h"
#include "value.h"

namespace manypy {

// An mpi_value view of a Value, for one call. Every tensor in it is a fresh
// DLManagedTensor (Tensor::share) whose ownership passes to the interpreter
// with the call; if the call is never made, the destructor releases them.
class ArgTree {
 public:
  explicit ArgTree(const Value& value);
  ~ArgTree();
  ArgTree(const ArgTree&) = delete;
  ArgTree& operator=(const ArgTree&) = delete;

  const mpi_value* get() const { return &root_; }
  // The interpreter now owns the tensors.
  void handed_over() { handed_over_ = true; }

 private:
  void build(const Value& value, mpi_value& out);
  mpi_value root_{};
  // Vectors, not deques: an empty deque allocates, and most calls have no
  // dict (an empty vector allocates nothing).
  std::vector<std::vector<mpi_value>> item_arrays_;
  std::vector<std::vector<const char*>> key_arrays_;
  std::vector<std::vector<size_t>> key_length_arrays_;
  bool handed_over_ = false;
};

// Receives one call's results and errors from the interpreter side.
class Outcome {
 public:
  // `ns`: the namespace of the interpreter the results come from. Its
  // tensors' deleters run that namespace's code, which may enter the
  // interpreter, so whatever thread frees one is prepared for it first.
  explicit Outcome(isolation::Namespace* ns = nullptr) : ns_(ns) {}

  std::optional<Error> error;

  mpi_sink sink() {
    return mpi_sink{this,
                    &Outcome::on_error,
                    &Outcome::on_value,
                    &Outcome::on_begin,
                    &Outcome::on_key,
                    &Outcome::on_end};
  }
  // The result: the single top-level value delivered.
  Value take_value() { return std::move(root_); }

 private:
  Value& slot();  // where the next value goes
  void store(const mpi_value* v);
  static void on_error(void* ctx, int code, const char* py_type, const char* message,
                       const char* traceback);
  static void on_value(void* ctx, const mpi_value* v);
  static void on_begin(void* ctx, int kind, size_t count);
  static void on_key(void* ctx, const char* key, size_t length);
  static void on_end(void* ctx);

  isolation::Namespace* ns_;
  Value root_;
  std::vector<Value*> open_;  // containers being filled, innermost last
  std::string pending_key_;   // a dict's key, until its value arrives
};

}  // namespace manypy
