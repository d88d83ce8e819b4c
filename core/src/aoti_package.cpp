#include "aoti_package.h"

#include <elf.h>
#include <sys/utsname.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "archive.h"
#include "error.h"

namespace manypy {

namespace {

constexpr const char* kModelsDir = "data/aotinductor/";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// libtorch's loader extracts every record under a directory of its own and
// opens the library from there: a name that climbs out of it would write
// (and load) elsewhere.
bool escapes(const std::string& name) {
  if (name.empty() || name[0] == '/' || name.find('\\') != std::string::npos) return true;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    if (name.compare(start, end - start, "..") == 0 && end - start == 2) return true;
    start = end + 1;
  }
  return false;
}

std::string host_machine() {
  struct utsname u {};
  return uname(&u) == 0 ? u.machine : "unknown";
}

// ELF e_machine for the architectures AOTInductor names in AOTI_MACHINE.
const char* elf_machine_name(unsigned machine) {
  switch (machine) {
    case EM_X86_64: return "x86_64";
    case EM_AARCH64: return "aarch64";
    case EM_386: return "i386";
    case EM_ARM: return "arm";
    case EM_PPC64: return "ppc64le";
    case EM_S390: return "s390x";
    case EM_RISCV: return "riscv64";
    default: return nullptr;
  }
}

unsigned host_elf_machine() {
#if defined(__x86_64__)
  return EM_X86_64;
#elif defined(__aarch64__)
  return EM_AARCH64;
#else
  return EM_NONE;
#endif
}

// Whether this CPU runs code compiled for `isa` (AOTI_CPU_ISA): the
// instruction sets AOTInductor compiles x86 kernels for. Others (DEFAULT,
// and the names of other architectures, which the machine check refuses
// first) need nothing.
bool cpu_supports(const std::string& isa, std::string* missing) {
#if defined(__x86_64__)
  struct Need {
    const char* isa;
    std::vector<const char*> features;
  };
  static const Need needs[] = {
      {"AVX2", {"avx2", "fma"}},
      {"AVX512", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}},
  };
  __builtin_cpu_init();
  for (const Need& need : needs) {
    if (isa != need.isa) continue;
    for (const char* feature : need.features) {
      // __builtin_cpu_supports takes a literal; map the few we need.
      bool has = false;
      if (!std::strcmp(feature, "avx2")) has = __builtin_cpu_supports("avx2");
      else if (!std::strcmp(feature, "fma")) has = __builtin_cpu_supports("fma");
      else if (!std::strcmp(feature, "avx512f")) has = __builtin_cpu_supports("avx512f");
      else if (!std::strcmp(feature, "avx512bw")) has = __builtin_cpu_supports("avx512bw");
      else if (!std::strcmp(feature, "avx512vl")) has = __builtin_cpu_supports("avx512vl");
      else if (!std::strcmp(feature, "avx512dq")) has = __builtin_cpu_supports("avx512dq");
      if (!has) {
        *missing = feature;
        return false;
      }
    }
  }
#else
  (void)isa;
  (void)missing;
#endif
  return true;
}

}  // namespace

std::string read_listed_record(const Archive& archive, const std::string& name) {
  try {
    return archive.read(name);
  } catch (const Error& e) {
    if (e.code() != Code::kNoSuchName) throw;
    // Listed by the zip's directory, not found by libtorch's reader: the
    // archive contradicts itself (as F17, docs/hardening.md).
    throw Error(Code::kBadArchive, archive.origin() + " lists record '" + name +
                                       "' but it cannot be read: " + e.message());
  }
}

std::map<std::string, std::string> parse_aoti_metadata(const std::string& origin,
                                                       const std::string& metadata_json) {
  nlohmann::json doc = nlohmann::json::parse(metadata_json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    throw Error(Code::kBadArchive, origin + ": the compiled model's metadata is not a JSON object");
  }
  std::map<std::string, std::string> metadata;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!it.value().is_string()) {
      throw Error(Code::kBadArchive, origin + ": the compiled model's metadata '" + it.key() +
                                         "' is not a string");
    }
    metadata[it.key()] = it.value().get<std::string>();
  }
  return metadata;
}

void check_aoti_metadata(const std::string& origin,
                         const std::map<std::string, std::string>& metadata) {
  auto value = [&](const char* key) -> std::string {
    auto it = metadata.find(key);
    return it == metadata.end() ? std::string() : it->second;
  };
  const std::string device = value("AOTI_DEVICE_KEY");
  if (!device.empty() && device != "cpu") {
    throw Error(Code::kUnsupportedVersion,
                origin + " was compiled for device '" + device +
                    "'; manypy runs AOTInductor packages on the CPU: compile it with "
                    "the model and its example inputs on the CPU");
  }
  const std::string platform = value("AOTI_PLATFORM");
  if (!platform.empty() && platform != "linux") {
    throw Error(Code::kUnsupportedVersion,
                origin + " was compiled for platform '" + platform + "', not linux");
  }
  const std::string machine = value("AOTI_MACHINE");
  const std::string here = host_machine();
  if (!machine.empty() && machine != here) {
    throw Error(Code::kUnsupportedVersion,
                origin + " was compiled for " + machine + " CPUs; this host is " + here);
  }
  const std::string isa = value("AOTI_CPU_ISA");
  std::string missing;
  if (!cpu_supports(isa, &missing)) {
    throw Error(Code::kUnsupportedVersion,
                origin + " was compiled for the " + isa + " instruction set, which this CPU "
                         "lacks (no " + missing + "): compile it on the kind of machine that "
                         "serves it");
  }
}

void check_aoti_library(const std::string& origin, const std::string& record,
                        std::string_view library) {
  const std::string where = origin + ": " + record;
  if (library.size() < sizeof(Elf64_Ehdr) || std::memcmp(library.data(), ELFMAG, SELFMAG) != 0) {
    throw Error(Code::kBadArchive, where + " is not an ELF shared library");
  }
  Elf64_Ehdr header;
  std::memcpy(&header, library.data(), sizeof header);
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB) {
    throw Error(Code::kUnsupportedVersion,
                where + " is not a 64-bit little-endian library (ELF class " +
                    std::to_string(header.e_ident[EI_CLASS]) + ", data " +
                    std::to_string(header.e_ident[EI_DATA]) + "): compiled for another CPU");
  }
  if (header.e_machine != host_elf_machine()) {
    const char* name = elf_machine_name(header.e_machine);
    throw Error(Code::kUnsupportedVersion,
                where + " was compiled for " +
                    (name ? std::string(name) : "ELF machine " + std::to_string(header.e_machine)) +
                    "; this host is " + host_machine());
  }
  if (header.e_type != ET_DYN) {
    throw Error(Code::kBadArchive,
                where + " is not a shared library (ELF type " + std::to_string(header.e_type) + ")");
  }
  // glibc's loader maps each loadable segment from the file as its program
  // header says, and faults (SIGBUS) touching a page past the end of a file
  // cut short: every segment it maps must be in the file.
  const uint64_t size = library.size();
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0 ||
      header.e_phoff > size || uint64_t{header.e_phnum} * sizeof(Elf64_Phdr) > size - header.e_phoff) {
    throw Error(Code::kBadArchive, where + " has no valid program header table (" +
                                       std::to_string(header.e_phnum) + " entries at offset " +
                                       std::to_string(header.e_phoff) + " of " +
                                       std::to_string(size) + " bytes)");
  }
  for (unsigned k = 0; k < header.e_phnum; ++k) {
    Elf64_Phdr segment;
    std::memcpy(&segment, library.data() + header.e_phoff + k * sizeof(Elf64_Phdr), sizeof segment);
    if (segment.p_type != PT_LOAD && segment.p_type != PT_DYNAMIC) continue;
    if (segment.p_offset > size || segment.p_filesz > size - segment.p_offset) {
      throw Error(Code::kBadArchive,
                  where + " is cut short: its segment " + std::to_string(k) + " needs bytes up to " +
                      std::to_string(segment.p_offset + segment.p_filesz) + ", and it has " +
                      std::to_string(size));
    }
  }
}

AotiPackageInfo inspect_aoti_package(const Archive& archive) {
  const std::string& origin = archive.origin();
  AotiPackageInfo info;
  info.records = archive.records();
  std::vector<std::string> libraries;
  for (const std::string& name : info.records) {
    if (escapes(name)) {
      throw Error(Code::kBadArchive, origin + ": record '" + name +
                                         "' would be extracted outside the package's directory");
    }
    if (name.rfind(kModelsDir, 0) == 0 && ends_with(name, ".so")) libraries.push_back(name);
  }
  if (libraries.empty()) {
    bool exported_program = false;
    for (const std::string& name : info.records) {
      if (name.rfind("models/", 0) == 0 && ends_with(name, ".json")) exported_program = true;
    }
    throw Error(Code::kNotAPackage,
                origin + (exported_program
                              ? " holds an exported program but no AOTInductor-compiled model "
                                "(no " + std::string(kModelsDir) + "<model>/*.so): compile it "
                                "with torch._inductor.aoti_compile_and_package"
                              : " is not an AOTInductor package (no " + std::string(kModelsDir) +
                                    "<model>/*.so); TorchScript archives load with "
                                    "manypy_script_load_file, torch.package archives with "
                                    "manypy_package_load_file"));
  }
  if (libraries.size() > 1) {
    throw Error(Code::kBadArchive, origin + " holds " + std::to_string(libraries.size()) +
                                       " compiled libraries (" + libraries[0] + ", " +
                                       libraries[1] + "); manypy loads packages of one model");
  }
  info.library = libraries[0];
  const std::string rest = info.library.substr(std::strlen(kModelsDir));
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || rest.find('/', slash + 1) != std::string::npos) {
    throw Error(Code::kBadArchive, origin + ": compiled library '" + info.library +
                                       "' is not in a model's directory");
  }
  info.model_name = rest.substr(0, slash);
  const std::string stem = info.library.substr(0, info.library.size() - 3);
  const std::string metadata_record = stem + "_metadata.json";
  if (!archive.has_record(metadata_record)) {
    throw Error(Code::kBadArchive, origin + " has no metadata for its compiled library (" +
                                       metadata_record + ")");
  }
  info.metadata = parse_aoti_metadata(origin, read_listed_record(archive, metadata_record));
  check_aoti_metadata(origin, info.metadata);
  check_aoti_library(origin, info.library, read_listed_record(archive, info.library));
  return info;
}

}  // namespace manypy
