#include "tree_spec.h"

#include <nlohmann/json.hpp>

#include "error.h"

namespace manypy {

namespace {

using json = nlohmann::json;

// Specs come from archives: nesting is bounded as values' is.
TreeSpec parse_node(const json& node, const std::string& what, uint32_t depth) {
  if (depth > Value::kMaxDepth) {
    throw Error(Code::kUnsupportedType,
                what + " nests deeper than " + std::to_string(Value::kMaxDepth) + " containers");
  }
  if (!node.is_object() || !node.contains("type") || !node.contains("children_spec") ||
      !node["children_spec"].is_array()) {
    throw Error(Code::kBadArchive, what + " is not a serialized TreeSpec");
  }
  const json& type = node["type"];
  const json& children = node["children_spec"];
  TreeSpec spec;
  if (type.is_null()) {
    if (!children.empty()) throw Error(Code::kBadArchive, what + ": a leaf with children");
    return spec;
  }
  if (!type.is_string()) throw Error(Code::kBadArchive, what + ": a type that is not a string");
  const std::string name = type.get<std::string>();
  if (name == "builtins.tuple") {
    spec.kind = TreeSpec::Kind::kTuple;
  } else if (name == "builtins.list") {
    spec.kind = TreeSpec::Kind::kList;
  } else if (name == "builtins.dict" || name == "collections.OrderedDict") {
    spec.kind = TreeSpec::Kind::kDict;
  } else if (name == "builtins.NoneType") {
    spec.kind = TreeSpec::Kind::kNone;
  } else {
    throw Error(Code::kUnsupportedType,
                what + " has a " + name +
                    "; manypy passes tensors in tuples, lists and dicts with string keys");
  }
  if (spec.kind == TreeSpec::Kind::kDict) {
    const json& context = node.value("context", json());
    json keys = context.is_string()
                    ? json::parse(context.get<std::string>(), nullptr, /*allow_exceptions=*/false)
                    : json();
    if (!keys.is_array() || keys.size() != children.size()) {
      throw Error(Code::kBadArchive, what + ": a dict whose keys do not match its values");
    }
    for (const json& key : keys) {
      if (!key.is_string()) {
        throw Error(Code::kUnsupportedType,
                    what + " has a dict key " + key.dump() + "; manypy's dicts have string keys");
      }
      spec.keys.push_back(key.get<std::string>());
    }
  }
  spec.leaves = 0;
  for (const json& child : children) {
    spec.children.push_back(parse_node(child, what, depth + 1));
    spec.leaves += spec.children.back().leaves;
  }
  if (spec.kind == TreeSpec::Kind::kNone && !spec.children.empty()) {
    throw Error(Code::kBadArchive, what + ": None with children");
  }
  return spec;
}

std::string quoted(const std::string& key) { return "'" + key + "'"; }

void flatten(const TreeSpec& spec, const Value& value, const std::string& path,
             std::vector<const Value*>* out) {
  using Kind = TreeSpec::Kind;
  switch (spec.kind) {
    case Kind::kLeaf:
      if (value.kind != ValueKind::kTensor) {
        throw Error(Code::kWrongKind,
                    path + " must be a tensor, not " + std::string(kind_name(value.kind)));
      }
      out->push_back(&value);
      return;
    case Kind::kNone:
      if (value.kind != ValueKind::kNone) {
        throw Error(Code::kInvalidArgument,
                    path + " must be None, not " + std::string(kind_name(value.kind)));
      }
      return;
    case Kind::kTuple:
    case Kind::kList:
      if (!value.is_sequence() || value.items.size() != spec.children.size()) {
        throw Error(Code::kInvalidArgument,
                    path + " must be a sequence of " + std::to_string(spec.children.size()) + " (" +
                        spec.describe() + "), not " +
                        (value.is_sequence() ? std::to_string(value.items.size()) + " items"
                                             : std::string(kind_name(value.kind))));
      }
      for (size_t k = 0; k < spec.children.size(); ++k) {
        flatten(spec.children[k], value.items[k], path + "[" + std::to_string(k) + "]", out);
      }
      return;
    case Kind::kDict:
      if (value.kind != ValueKind::kDict) {
        throw Error(Code::kInvalidArgument, path + " must be a dict (" + spec.describe() +
                                                "), not " + kind_name(value.kind));
      }
      for (size_t k = 0; k < spec.keys.size(); ++k) {
        long at = value.find_key(spec.keys[k]);
        if (at < 0) {
          throw Error(Code::kInvalidArgument, path + " has no key " + quoted(spec.keys[k]));
        }
        flatten(spec.children[k], value.items[static_cast<size_t>(at)],
                path + "[" + quoted(spec.keys[k]) + "]", out);
      }
      if (value.items.size() != spec.keys.size()) {
        for (size_t k = 0; k < value.keys.size(); ++k) {
          bool known = false;
          for (const std::string& key : spec.keys) known = known || key == value.keys[k];
          if (!known) {
            throw Error(Code::kInvalidArgument, path + " has key " + quoted(value.keys[k]) +
                                                    ", which the model does not take");
          }
        }
      }
      return;
  }
}

Value build(const TreeSpec& spec, std::vector<Value>& tensors, size_t* next) {
  using Kind = TreeSpec::Kind;
  switch (spec.kind) {
    case Kind::kLeaf:
      return std::move(tensors[(*next)++]);
    case Kind::kNone:
      return Value::none();
    case Kind::kTuple:
    case Kind::kList: {
      Value out =
          Value::container(spec.kind == Kind::kTuple ? ValueKind::kTuple : ValueKind::kList);
      for (const TreeSpec& child : spec.children) {
        Value item = build(child, tensors, next);
        out.depth = out.depth_with(item);
        out.append(std::move(item));
      }
      return out;
    }
    case Kind::kDict: {
      Value out = Value::container(ValueKind::kDict);
      for (size_t k = 0; k < spec.children.size(); ++k) {
        Value item = build(spec.children[k], tensors, next);
        out.depth = out.depth_with(item);
        out.put(spec.keys[k], std::move(item));
      }
      return out;
    }
  }
  return Value::none();
}

}  // namespace

TreeSpec TreeSpec::parse(const std::string& text, const std::string& what) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array() || doc.size() != 2 || !doc[0].is_number_integer()) {
    throw Error(Code::kBadArchive, what + " is not a serialized TreeSpec");
  }
  if (doc[0].get<int64_t>() != 1) {
    throw Error(Code::kUnsupportedVersion,
                what + " uses TreeSpec protocol " + doc[0].dump() + "; manypy reads protocol 1");
  }
  return parse_node(doc[1], what, 0);
}

std::string TreeSpec::describe() const {
  switch (kind) {
    case Kind::kLeaf:
      return "Tensor";
    case Kind::kNone:
      return "None";
    case Kind::kTuple:
    case Kind::kList: {
      std::string s = kind == Kind::kTuple ? "(" : "[";
      for (size_t k = 0; k < children.size(); ++k) {
        if (k) s += ", ";
        s += children[k].describe();
      }
      if (kind == Kind::kTuple && children.size() == 1) s += ",";
      return s + (kind == Kind::kTuple ? ")" : "]");
    }
    case Kind::kDict: {
      std::string s = "{";
      for (size_t k = 0; k < children.size(); ++k) {
        if (k) s += ", ";
        s += quoted(keys[k]) + ": " + children[k].describe();
      }
      return s + "}";
    }
  }
  return "?";
}

std::vector<const Value*> flatten_arguments(const TreeSpec& input_spec, const Value* args,
                                            const Value* kwargs) {
  const bool shaped = input_spec.kind == TreeSpec::Kind::kTuple &&
                      input_spec.children.size() == 2 &&
                      input_spec.children[1].kind == TreeSpec::Kind::kDict;
  if (!shaped) {
    throw Error(Code::kUnsupportedType,
                "the model's input spec is not (args, kwargs): " + input_spec.describe());
  }
  const TreeSpec& positional = input_spec.children[0];
  const TreeSpec& named = input_spec.children[1];
  std::vector<const Value*> out;
  out.reserve(input_spec.leaves);
  const Value empty_tuple = Value::container(ValueKind::kTuple);
  const Value empty_dict = Value::container(ValueKind::kDict);
  const Value& a = args ? *args : empty_tuple;
  if (a.is_sequence() && a.items.size() != positional.children.size()) {
    throw Error(Code::kInvalidArgument, "the model takes " +
                                            std::to_string(positional.children.size()) +
                                            " positional arguments " + positional.describe() +
                                            ", not " + std::to_string(a.items.size()));
  }
  flatten(positional, a, "args", &out);
  flatten(named, kwargs ? *kwargs : empty_dict, "kwargs", &out);
  return out;
}

Value unflatten_result(const TreeSpec& output_spec, std::vector<Value> tensors) {
  if (tensors.size() != output_spec.leaves) {
    throw Error(Code::kInternal, "the compiled model returned " + std::to_string(tensors.size()) +
                                     " tensors; its output spec " + output_spec.describe() +
                                     " has " + std::to_string(output_spec.leaves));
  }
  size_t next = 0;
  return build(output_spec, tensors, &next);
}

}  // namespace manypy
