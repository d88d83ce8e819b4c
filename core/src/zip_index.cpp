#include "zip_index.h"

#include <zip.h>

#include <cstring>
#include <memory>

#include "error.h"

namespace manypy {

namespace {

struct ZipError {
  zip_error_t error;
  ZipError() { zip_error_init(&error); }
  ~ZipError() { zip_error_fini(&error); }
  std::string text() { return zip_error_strerror(&error); }
};

struct Discard {
  void operator()(zip_t* archive) const { zip_discard(archive); }
};

bool starts_like_zip(const void* data, size_t size) {
  return size >= 4 && std::memcmp(data, "PK\x03\x04", 4) == 0;
}

}  // namespace

ZipIndex::ZipIndex(const void* data, size_t size, const std::string& origin) {
  ZipError error;
  // A source over our memory: libzip reads it, never frees or writes it.
  zip_source_t* source = zip_source_buffer_create(size ? data : "", size, 0, &error.error);
  if (source == nullptr) throw std::bad_alloc();
  std::unique_ptr<zip_t, Discard> archive(
      zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error.error));
  if (archive == nullptr) {
    zip_source_free(source);
    throw Error(Code::kBadArchive,
                origin +
                    (starts_like_zip(data, size) ? " is a truncated or corrupt zip archive"
                                                 : " is not a zip archive") +
                    " (" + error.text() + ")");
  }
  const zip_int64_t count = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t k = 0; k < count; ++k) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(archive.get(), static_cast<zip_uint64_t>(k), 0, &st) != 0 ||
        (st.valid & (ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD)) !=
            (ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD)) {
      throw Error(Code::kBadArchive, origin + ": zip entry " + std::to_string(k) +
                                         " cannot be read (" + zip_strerror(archive.get()) + ")");
    }
    if (k == 0) {
      const char* slash = std::strchr(st.name, '/');
      directory_.assign(st.name, slash ? slash + 1 - st.name : 0);
    }
    ZipEntry entry;
    entry.size = st.size;
    entry.compressed_size = st.comp_size;
    entry.method = st.comp_method;
    if (!entries_.emplace(st.name, entry).second) {
      throw Error(Code::kBadArchive,
                  origin + " holds two records named '" + std::string(st.name) + "'");
    }
  }
}

const ZipEntry* ZipIndex::find_record(const std::string& record) const {
  auto it = entries_.find(directory_ + record);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace manypy
