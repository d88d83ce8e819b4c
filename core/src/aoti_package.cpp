#include "aoti_package.h"

#include <elf.h>
#include <sys/utsname.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

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
    case EM_X86_64:
      return "x86_64";
    case EM_AARCH64:
      return "aarch64";
    case EM_386:
      return "i386";
    case EM_ARM:
      return "arm";
    case EM_PPC64:
      return "ppc64le";
    case EM_S390:
      return "s390x";
    case EM_RISCV:
      return "riscv64";
    default:
      return nullptr;
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
      if (!std::strcmp(feature, "avx2"))
        has = __builtin_cpu_supports("avx2");
      else if (!std::strcmp(feature, "fma"))
        has = __builtin_cpu_supports("fma");
      else if (!std::strcmp(feature, "avx512f"))
        has = __builtin_cpu_supports("avx512f");
      else if (!std::strcmp(feature, "avx512bw"))
        has = __builtin_cpu_supports("avx512bw");
      else if (!std::strcmp(feature, "avx512vl"))
        has = __builtin_cpu_supports("avx512vl");
      else if (!std::strcmp(feature, "avx512dq"))
        has = __builtin_cpu_supports("avx512dq");
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

// The program header table of a library whose ELF header says where it is,
// and whose table check_aoti_library found in the file.
std::vector<Elf64_Phdr> program_headers(std::string_view library) {
  Elf64_Ehdr header;
  std::memcpy(&header, library.data(), sizeof header);
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  std::memcpy(segments.data(), library.data() + header.e_phoff,
              header.e_phnum * sizeof(Elf64_Phdr));
  return segments;
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
      throw Error(Code::kBadArchive,
                  origin + ": the compiled model's metadata '" + it.key() + "' is not a string");
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
    throw Error(Code::kUnsupportedVersion, origin + " was compiled for the " + isa +
                                               " instruction set, which this CPU "
                                               "lacks (no " +
                                               missing +
                                               "): compile it on the kind of machine that "
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
    throw Error(Code::kBadArchive, where + " is not a shared library (ELF type " +
                                       std::to_string(header.e_type) + ")");
  }
  // glibc's loader maps each loadable segment from the file as its program
  // header says, and faults (SIGBUS) touching a page past the end of a file
  // cut short: every segment it maps must be in the file.
  const uint64_t size = library.size();
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0 || header.e_phoff > size ||
      uint64_t{header.e_phnum} * sizeof(Elf64_Phdr) > size - header.e_phoff) {
    throw Error(Code::kBadArchive, where + " has no valid program header table (" +
                                       std::to_string(header.e_phnum) + " entries at offset " +
                                       std::to_string(header.e_phoff) + " of " +
                                       std::to_string(size) + " bytes)");
  }
  const std::vector<Elf64_Phdr> segments = program_headers(library);
  for (unsigned k = 0; k < segments.size(); ++k) {
    const Elf64_Phdr& segment = segments[k];
    if (segment.p_type != PT_LOAD && segment.p_type != PT_DYNAMIC) continue;
    if (segment.p_offset > size || segment.p_filesz > size - segment.p_offset) {
      throw Error(Code::kBadArchive, where + " is cut short: its segment " + std::to_string(k) +
                                         " needs bytes up to " +
                                         std::to_string(segment.p_offset + segment.p_filesz) +
                                         ", and it has " + std::to_string(size));
    }
  }
  // The runner reads the names it needs (aoti_runner_torch2.cpp): a table
  // out of the file is refused here, with the package's name.
  try {
    (void)needed_libraries(library);
  } catch (const Error& e) {
    throw Error(Code::kBadArchive, where + ": " + e.message());
  }
}

namespace {

// A library's dynamic section as its file holds it: where each entry is,
// and where the string table its DT_NEEDED names index lies.
struct DynamicSection {
  struct Entry {
    size_t offset;  // of the Elf64_Dyn in the file
    Elf64_Dyn dyn;
  };
  std::vector<Entry> entries;  // up to DT_NULL
  size_t strtab = 0;           // file offset of the string table
  size_t strsz = 0;

  std::string_view string(std::string_view library, uint64_t index) const {
    if (index >= strsz) throw Error(Code::kBadArchive, "a dynamic string lies outside its table");
    const std::string_view table = library.substr(strtab, strsz);
    const size_t end = table.find('\0', index);
    if (end == std::string_view::npos) {
      throw Error(Code::kBadArchive, "a dynamic string runs off the end of its table");
    }
    return table.substr(index, end - index);
  }
};

// Reads the dynamic section of a library check_aoti_library accepted (so
// its program headers and the segments they describe are in the file).
DynamicSection dynamic_section(std::string_view library) {
  const std::vector<Elf64_Phdr> segments = program_headers(library);
  DynamicSection dynamic;
  uint64_t strtab_address = 0;
  bool has_strtab = false;
  for (const Elf64_Phdr& segment : segments) {
    if (segment.p_type != PT_DYNAMIC) continue;
    for (uint64_t at = segment.p_offset;
         at + sizeof(Elf64_Dyn) <= segment.p_offset + segment.p_filesz; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn dyn;
      std::memcpy(&dyn, library.data() + at, sizeof dyn);
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag == DT_STRTAB) strtab_address = dyn.d_un.d_ptr, has_strtab = true;
      if (dyn.d_tag == DT_STRSZ) dynamic.strsz = dyn.d_un.d_val;
      dynamic.entries.push_back({at, dyn});
    }
  }
  if (dynamic.entries.empty()) return dynamic;
  // DT_STRTAB is an address: the loadable segment that holds it says where
  // it is in the file.
  for (const Elf64_Phdr& segment : segments) {
    if (!has_strtab || segment.p_type != PT_LOAD || strtab_address < segment.p_vaddr ||
        strtab_address - segment.p_vaddr >= segment.p_filesz) {
      continue;
    }
    dynamic.strtab = segment.p_offset + (strtab_address - segment.p_vaddr);
    if (dynamic.strsz > segment.p_offset + segment.p_filesz - dynamic.strtab) break;
    return dynamic;
  }
  throw Error(Code::kBadArchive, "its dynamic string table is not in the file");
}

}  // namespace

std::vector<std::string> needed_libraries(std::string_view library) {
  const DynamicSection dynamic = dynamic_section(library);
  std::vector<std::string> names;
  for (const DynamicSection::Entry& e : dynamic.entries) {
    if (e.dyn.d_tag == DT_NEEDED) names.emplace_back(dynamic.string(library, e.dyn.d_un.d_val));
  }
  return names;
}

int redirect_needed(std::string& library, std::string_view from, std::string_view to) {
  const DynamicSection dynamic = dynamic_section(library);
  std::optional<uint64_t> to_index;
  for (const DynamicSection::Entry& e : dynamic.entries) {
    if (e.dyn.d_tag == DT_NEEDED && dynamic.string(library, e.dyn.d_un.d_val) == to) {
      to_index = e.dyn.d_un.d_val;
    }
  }
  if (!to_index) return 0;
  int changed = 0;
  for (const DynamicSection::Entry& e : dynamic.entries) {
    if (e.dyn.d_tag != DT_NEEDED || dynamic.string(library, e.dyn.d_un.d_val) != from) continue;
    Elf64_Dyn dyn = e.dyn;
    dyn.d_un.d_val = *to_index;
    std::memcpy(library.data() + e.offset, &dyn, sizeof dyn);
    ++changed;
  }
  return changed;
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
                                "(no " +
                                    std::string(kModelsDir) +
                                    "<model>/*.so): compile it "
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
    throw Error(Code::kBadArchive,
                origin + ": compiled library '" + info.library + "' is not in a model's directory");
  }
  info.model_name = rest.substr(0, slash);
  const std::string stem = info.library.substr(0, info.library.size() - 3);
  const std::string metadata_record = stem + "_metadata.json";
  if (!archive.has_record(metadata_record)) {
    throw Error(Code::kBadArchive,
                origin + " has no metadata for its compiled library (" + metadata_record + ")");
  }
  info.metadata = parse_aoti_metadata(origin, read_listed_record(archive, metadata_record));
  check_aoti_metadata(origin, info.metadata);
  check_aoti_library(origin, info.library, read_listed_record(archive, info.library));
  return info;
}

}  // namespace manypy
