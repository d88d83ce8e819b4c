// manypy's own checks of AOTInductor packages and call specs, which need no
// torch 2.x (core/src/aoti_package.h, core/src/tree_spec.h): the fuzz
// target's hand-made packages, each with the outcome it stands for, and the
// call spec's parsing, flattening and rebuilding.
#include "aoti_package.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

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

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The offset in `library` of its dynamic entry tagged `tag`.
size_t dynamic_entry(const std::string& library, int64_t tag) {
  Elf64_Ehdr header;
  std::memcpy(&header, library.data(), sizeof header);
  for (unsigned k = 0; k < header.e_phnum; ++k) {
    Elf64_Phdr segment;
    std::memcpy(&segment, library.data() + header.e_phoff + k * sizeof segment, sizeof segment);
    if (segment.p_type != PT_DYNAMIC) continue;
    for (size_t at = segment.p_offset; at < segment.p_offset + segment.p_filesz;
         at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn dyn;
      std::memcpy(&dyn, library.data() + at, sizeof dyn);
      if (dyn.d_tag == tag) return at;
    }
  }
  ADD_FAILURE() << "no dynamic entry " << tag;
  return 0;
}

// A real library (this test's own executable, a PIE): its dependencies
// read, and one pointed at another, as the runner points a package's
// libtorch.so at libtorch_cpu.so.
TEST(AotiPackage, ADependencyIsPointedAtOneTheLibraryAlreadyHas) {
  std::string library = file_bytes("/proc/self/exe");
  check_aoti_library("self", "exe", library);
  const std::vector<std::string> needed = needed_libraries(library);
  ASSERT_GE(needed.size(), 2u);
  EXPECT_NE(std::find(needed.begin(), needed.end(), "libc.so.6"), needed.end());
  const std::string from = needed.front(), to = needed.back();
  const size_t size = library.size();

  EXPECT_EQ(redirect_needed(library, "libabsent.so", to), 0);
  EXPECT_EQ(redirect_needed(library, from, "libabsent.so"), 0);
  EXPECT_EQ(needed_libraries(library), needed);

  EXPECT_EQ(redirect_needed(library, from, to), 1);
  std::vector<std::string> expected = needed;
  expected.front() = to;
  EXPECT_EQ(needed_libraries(library), expected);
  EXPECT_EQ(library.size(), size);
}

TEST(AotiPackage, APackageLibraryNeedingLibtorchIsPointedAtLibtorchCpu) {
  const std::string bytes = seed("needs_libtorch.pt2");
  auto archive = Archive::from_bytes(bytes.data(), bytes.size());
  const AotiPackageInfo info = inspect_aoti_package(*archive);
  std::string library = read_listed_record(*archive, info.library);
  using Names = std::vector<std::string>;
  EXPECT_EQ(needed_libraries(library), (Names{"libtorch.so", "libtorch_cpu.so", "libc.so.6"}));
  EXPECT_EQ(redirect_needed(library, "libtorch.so", "libtorch_cpu.so"), 1);
  EXPECT_EQ(needed_libraries(library), (Names{"libtorch_cpu.so", "libtorch_cpu.so", "libc.so.6"}));
}

TEST(AotiPackage, ADynamicStringTableOutsideTheFileIsRefused) {
  std::string library = file_bytes("/proc/self/exe");
  Elf64_Dyn strtab;
  const size_t at = dynamic_entry(library, DT_STRTAB);
  std::memcpy(&strtab, library.data() + at, sizeof strtab);
  strtab.d_un.d_ptr = uint64_t{1} << 40;
  std::memcpy(library.data() + at, &strtab, sizeof strtab);
  try {
    check_aoti_library("x.pt2", "lib.so", library);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kBadArchive);
    EXPECT_NE(e.message().find("x.pt2: lib.so: its dynamic string table is not in the file"),
              std::string::npos)
        << e.message();
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
