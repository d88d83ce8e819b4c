// manypy's own checks of AOTInductor packages and call specs, which need no
// torch 2.x (core/src/aoti_package.h, core/src/tree_spec.h): the fuzz
// target's hand-made packages, each with the outcome it stands for, and the
// call spec's parsing, flattening and rebuilding.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "aoti_package.h"
#include "archive.h"
#include "error.h"
#include "tree_spec.h"

namespace manypy {
namespace {

std::string seed(const std::string& name) {
  std::ifstream in(std::string(MANYPY_PT2_SEEDS_DIR) + "/" + name, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  EXPECT_TRUE(in.good() || in.eof()) << name;
  return bytes.str();
}

// The code and message of inspecting a seed package.
std::pair<Code, std::string> inspect(const std::string& name) {
  const std::string bytes = seed(name);
  try {
    inspect_aoti_package(*Archive::from_bytes(bytes.data(), bytes.size()));
  } catch (const Error& e) {
    return {e.code(), e.message()};
  }
  return {Code::kInternal, "accepted"};
}

TEST(AotiPackage, AWellFormedPackageIsAccepted) {
  const std::string bytes = seed("minimal.pt2");
  AotiPackageInfo info = inspect_aoti_package(*Archive::from_bytes(bytes.data(), bytes.size()));
  EXPECT_EQ(info.model_name, "model");
  EXPECT_EQ(info.library, "data/aotinductor/model/cseed.wrapper.so");
  EXPECT_EQ(info.metadata.at("AOTI_DEVICE_KEY"), "cpu");
}

TEST(AotiPackage, EachDoctoredPackageGetsItsCode) {
  struct Case {
    const char* seed;
    Code code;
    const char* message;
  };
  const Case cases[] = {
      {"cuda.pt2", Code::kUnsupportedVersion, "compiled for device 'cuda'"},
      {"aarch64.pt2", Code::kUnsupportedVersion, "was compiled for aarch64"},
      {"not_elf.pt2", Code::kBadArchive, "is not an ELF shared library"},
      {"bad_metadata.pt2", Code::kBadArchive, "metadata is not a JSON object"},
      {"escape.pt2", Code::kBadArchive, "would be extracted outside"},
      {"two_models.pt2", Code::kBadArchive, "holds 2 compiled libraries"},
      {"exported_only.pt2", Code::kNotAPackage, "holds an exported program"},
  };
  for (const Case& c : cases) {
    auto [code, message] = inspect(c.seed);
    EXPECT_EQ(code, c.code) << c.seed << ": " << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << c.seed << ": " << message;
  }
}

TEST(AotiPackage, ALibraryCutShortIsRefusedBeforeTheLoaderMapsIt) {
  // An ELF header whose program header table lies past the end.
  std::string library(64, '\0');
  const unsigned char ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  library.replace(0, sizeof ident, reinterpret_cast<const char*>(ident), sizeof ident);
  library[16] = 3;                      // ET_DYN
  library[18] = 62;                     // EM_X86_64
  library[32] = static_cast<char>(64);  // e_phoff
  library[54] = 56;                     // e_phentsize
  library[56] = 1;                      // e_phnum
  try {
    check_aoti_library("x.pt2", "lib.so", library);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kBadArchive);
    EXPECT_NE(e.message().find("no valid program header table"), std::string::npos) << e.message();
  }
}

TEST(TreeSpec, FlattensArgumentsAndRebuildsResults) {
  const TreeSpec input = TreeSpec::parse(seed("spec_nested"), "input spec");
  EXPECT_EQ(input.describe(), "(([Tensor, None],), {'mask': Tensor})");
  EXPECT_EQ(input.leaves, 2u);

  Value list = Value::container(ValueKind::kList);
  Value tensor;
  tensor.kind = ValueKind::kTensor;
  list.append(std::move(tensor));
  list.append(Value::none());
  list.depth = 1;
  Value args = Value::container(ValueKind::kTuple);
  args.depth = 2;
  args.append(std::move(list));
  Value kwargs = Value::container(ValueKind::kDict);
  Value mask;
  mask.kind = ValueKind::kTensor;
  kwargs.put("mask", std::move(mask));
  std::vector<const Value*> leaves = flatten_arguments(input, &args, &kwargs);
  ASSERT_EQ(leaves.size(), 2u);
  EXPECT_EQ(leaves[0], &args.items[0].items[0]);
  EXPECT_EQ(leaves[1], &kwargs.items[0]);

  // A missing key, an extra one, a wrong count: each named.
  Value empty = Value::container(ValueKind::kDict);
  try {
    flatten_arguments(input, &args, &empty);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_EQ(e.message(), "kwargs has no key 'mask'");
  }
  Value none_args = Value::container(ValueKind::kTuple);
  try {
    flatten_arguments(input, &none_args, &kwargs);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(e.message().find("takes 1 positional arguments"), std::string::npos) << e.message();
  }

  const TreeSpec output = TreeSpec::parse(seed("spec_output_dict"), "output spec");
  std::vector<Value> tensors;
  for (int k = 0; k < 2; ++k) tensors.push_back(Value::of_int(k));  // stand-ins
  Value result = unflatten_result(output, std::move(tensors));
  ASSERT_EQ(result.kind, ValueKind::kDict);
  EXPECT_EQ(result.keys[0], "logits");
  EXPECT_EQ(result.items[1].i, 1);
}

TEST(TreeSpec, RefusesWhatManypyHasNoValueFor) {
  EXPECT_THROW(TreeSpec::parse("[1, {\"type\": \"collections.namedtuple\", \"context\": \"x\", "
                               "\"children_spec\": []}]",
                               "spec"),
               Error);
  try {
    TreeSpec::parse("not json", "spec");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kBadArchive);
  }
}

}  // namespace
}  // namespace manypy
