// The shape of an exported model's inputs and outputs: torch.utils._pytree's
// serialized TreeSpec (treespec_dumps, protocol 1), which an AOTInductor
// package carries as its call spec. Arguments are flattened along the input
// spec into the tensors the compiled model takes, and its tensors unflattened
// along the output spec into the tuples, lists and dicts the model returned.
#pragma once

#include <string>
#include <vector>

#include "value.h"

namespace manypy {

struct TreeSpec {
  enum class Kind { kLeaf, kNone, kTuple, kList, kDict };
  Kind kind = Kind::kLeaf;
  std::vector<std::string> keys;  // kDict, in the model's order
  std::vector<TreeSpec> children;
  size_t leaves = 1;  // tensors under this node

  // Throws Error(kUnsupportedType) for a container manypy has no value for
  // (a dataclass, a namedtuple, a dict with keys that are not strings), and
  // Error(kBadArchive) for text that is no TreeSpec; `what` names it.
  static TreeSpec parse(const std::string& json, const std::string& what);
  // "(Tensor, [Tensor], {'k': Tensor})": for messages.
  std::string describe() const;
};

// The tensors of (args, kwargs) in the order of `input_spec` (a tuple of the
// positional spec and the keyword dict spec). Throws Error(kInvalidArgument)
// naming the first argument that does not match (a missing or extra one, a
// list where a tensor belongs), Error(kWrongKind) for a leaf that is not a
// tensor.
std::vector<const Value*> flatten_arguments(const TreeSpec& input_spec, const Value* args,
                                            const Value* kwargs);

// Builds the result from the model's output tensors. Throws Error(kInternal)
// if their number is not the spec's.
Value unflatten_result(const TreeSpec& output_spec, std::vector<Value> tensors);

}  // namespace manypy
