// The structure of a zip archive in host memory, checked with libzip before
// libtorch's reader touches it. libtorch's reader (miniz over a read
// adapter) trusts the offsets an archive gives; libzip, opened with
// ZIP_CHECKCONS, checks the end record, the central directory, every local
// header against its central entry, and that every record lies inside the
// archive. A truncated or doctored file is refused here, with libzip's
// reason, before anything else reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace manypy {

constexpr uint16_t kZipStored = 0;  // the zip compression method "stored"

struct ZipEntry {
  uint64_t size = 0;  // uncompressed
  uint64_t compressed_size = 0;
  uint16_t method = 0;  // 0: stored, 8: deflated, ...
};

class ZipIndex {
 public:
  // Checks the archive; throws Error(kBadArchive) naming what is wrong.
  // `origin` names the archive in messages.
  ZipIndex(const void* data, size_t size, const std::string& origin);

  // The entry of a PyTorch archive's record, named as libtorch's reader
  // names it: without the archive's top directory ("data.pkl" for the entry
  // "model/data.pkl"). nullptr if there is none.
  const ZipEntry* find_record(const std::string& record) const;

 private:
  std::unordered_map<std::string, ZipEntry> entries_;
  std::string directory_;  // the first entry's top directory and its slash
};

}  // namespace manypy
