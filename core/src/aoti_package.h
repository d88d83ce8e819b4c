// What an AOTInductor package (.pt2, torch._inductor.aoti_compile_and_package)
// holds, read from an Archive before libtorch's loader sees it: the model's
// compiled library, the metadata AOTInductor wrote beside it, and whether
// this host can run it. Needs no torch 2.x: the checks are manypy's own, so
// that a package for another device, CPU or operating system is refused
// with a precise error instead of failing (or faulting) inside the loader.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace manypy {

class Archive;

struct AotiPackageInfo {
  std::string model_name;                       // "model": the directory under data/aotinductor/
  std::string library;                          // the record of the compiled library (.so)
  std::map<std::string, std::string> metadata;  // AOTI_DEVICE_KEY, AOTI_CPU_ISA, ...
  std::vector<std::string> records;
};

// Inspects `archive` as a .pt2 package. Throws Error:
//  - kNotAPackage: a PyTorch archive that is no AOTInductor package (a
//    TorchScript archive, a torch.package, a .pt2 with only an exported
//    program and no compiled model);
//  - kBadArchive: a package that contradicts itself (several compiled
//    libraries, unreadable metadata, a record name that would leave the
//    directory it is extracted to, a library that is no ELF shared object,
//    is cut short, or has its dynamic string table outside the file);
//  - kUnsupportedVersion: compiled for what this host is not: another
//    device (CUDA), operating system, CPU architecture or instruction set.
AotiPackageInfo inspect_aoti_package(const Archive& archive);

// A record `archive.records()` listed; Error(kBadArchive) if it cannot be
// read after all (the archive contradicts itself), never kNoSuchName.
std::string read_listed_record(const Archive& archive, const std::string& name);

// The same checks on the parts: `metadata_json` is the model's
// *_metadata.json, `library` its compiled library's bytes (its ELF header,
// and that every segment the dynamic loader maps is in the file).
std::map<std::string, std::string> parse_aoti_metadata(const std::string& origin,
                                                       const std::string& metadata_json);
void check_aoti_metadata(const std::string& origin,
                         const std::map<std::string, std::string>& metadata);
void check_aoti_library(const std::string& origin, const std::string& record,
                        std::string_view library);

// The names a (checked) library's DT_NEEDED entries give, in order. Throws
// Error(kBadArchive) if its dynamic section or string table is not in the
// file.
std::vector<std::string> needed_libraries(std::string_view library);

// Makes each DT_NEEDED entry of `library` (checked) that names `from` name
// `to` instead, where `to` is already one of its DT_NEEDED names (so the
// string is in its table and the file changes by 8 bytes an entry). Returns
// the number of entries changed: 0 if it does not need `from`, or does not
// already need `to`.
int redirect_needed(std::string& library, std::string_view from, std::string_view to);

}  // namespace manypy
