#include "open_archives.h"

#include <algorithm>
#include <cstring>

#include "error.h"
#include "interp_api.h"

namespace manypy {

namespace {

void copy_message(const std::string& text, char* out, size_t size) {
  if (size == 0) return;
  size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

void OpenArchives::add(uint64_t package_id, const std::shared_ptr<Archive>& archive) {
  std::lock_guard<std::mutex> lock(mu_);
  archives_[package_id] = archive;
}

void OpenArchives::remove(uint64_t package_id) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  archives_.erase(package_id);
}

int OpenArchives::read_record(uint64_t package_id, const char* record, uint64_t nbytes,
                              DLManagedTensor** out, char* error, size_t error_size) noexcept {
  try {
    std::shared_ptr<Archive> archive;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = archives_.find(package_id);
      if (it != archives_.end()) archive = it->second.lock();
    }
    if (!archive) {
      copy_message("package " + std::to_string(package_id) + " is closed", error, error_size);
      return MPI_ERR_INTERNAL;
    }
    *out = archive->record_view(record, nbytes);
    return MPI_OK;
  } catch (const Error& e) {
    copy_message(e.message(), error, error_size);
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    copy_message(e.what(), error, error_size);
    return MPI_ERR_INTERNAL;
  }
}

}  // namespace manypy
