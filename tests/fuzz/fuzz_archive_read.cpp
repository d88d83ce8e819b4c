// Fuzz target: any bytes as a PyTorch archive file, read through the C API
// without Python: manypy_archive_list_files, then manypy_archive_read_file of
// every listed record (up to 64) and of one that is not there. The bytes go
// to a memfd, opened by path as /proc/self/fd/N, so the file path of the API
// (open, fstat, mmap) is the one exercised.
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fuzz_support.h"
#include "zip_mutator.h"

namespace {

int memfd() {
  static int fd = [] {
    int f = memfd_create("manypy-fuzz-archive", MFD_CLOEXEC);
    if (f < 0) fuzz::fail("memfd_create failed");
    return f;
  }();
  return fd;
}

void write_file(const uint8_t* data, size_t size) {
  int fd = memfd();
  if (ftruncate(fd, 0) != 0) fuzz::fail("ftruncate failed");
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) fuzz::fail("pwrite failed");
    done += static_cast<size_t>(n);
  }
}

bool is_archive_error(manypy_code code) {
  return code == MANYPY_ERR_BAD_ARCHIVE || code == MANYPY_ERR_NOT_A_PACKAGE ||
         code == MANYPY_ERR_UNSUPPORTED_VERSION || code == MANYPY_ERR_RESOURCE_EXHAUSTED;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write_file(data, size);
  const std::string path = "/proc/self/fd/" + std::to_string(memfd());

  manypy_value* list = nullptr;
  manypy_code code =
      fuzz::take(manypy_archive_list_files(path.c_str(), &list), "manypy_archive_list_files");
  if (code != MANYPY_OK) {
    FUZZ_CHECK(is_archive_error(code), manypy_code_name(code));
    FUZZ_CHECK(list == nullptr, "a failed call wrote its out-parameter");
    return 0;
  }
  FUZZ_CHECK(manypy_value_get_kind(list) == MANYPY_VALUE_LIST, "records are not a list");
  size_t n = 0;
  FUZZ_CHECK(fuzz::take(manypy_value_length(list, &n), "length") == MANYPY_OK, "length");
  std::vector<std::string> names;
  for (size_t k = 0; k < n; ++k) {
    const manypy_value* item = nullptr;
    FUZZ_CHECK(fuzz::take(manypy_value_get_item(list, k, &item), "get_item") == MANYPY_OK,
               "get_item");
    const char* s = nullptr;
    size_t len = 0;
    FUZZ_CHECK(fuzz::take(manypy_value_get_string(item, &s, &len), "get_string") == MANYPY_OK,
               "a record name is not a string");
    names.emplace_back(s, len);
  }
  manypy_value_free(list);

  if (names.size() > 64) names.resize(64);
  names.push_back("manypy-fuzz/no/such/record");
  for (size_t k = 0; k < names.size(); ++k) {
    manypy_value* bytes = nullptr;
    code = fuzz::take(manypy_archive_read_file(path.c_str(), names[k].c_str(), &bytes),
                      "manypy_archive_read_file");
    if (code == MANYPY_OK) {
      // (Unlisted can be found: miniz looks names up ignoring case.)
      FUZZ_CHECK(manypy_value_get_kind(bytes) == MANYPY_VALUE_BYTES, "not bytes");
      const void* p = nullptr;
      size_t len = 0;
      FUZZ_CHECK(fuzz::take(manypy_value_get_bytes(bytes, &p, &len), "get_bytes") == MANYPY_OK,
                 "get_bytes");
      // Touch every byte: ASan sees a record that was not really read.
      volatile unsigned sum = 0;
      for (size_t i = 0; i < len; ++i) sum += static_cast<const unsigned char*>(p)[i];
      (void)sum;
      manypy_value_free(bytes);
    } else if (code == MANYPY_ERR_NO_SUCH_NAME) {
      // Allowed for a listed record too: a name with a NUL in it is looked
      // up only up to the NUL, and libtorch's zip reader (miniz) lists
      // names its lookup does not find (docs/hardening.md, "Findings").
    } else {
      FUZZ_CHECK(is_archive_error(code) || code == MANYPY_ERR_INVALID_ARGUMENT,
                 manypy_code_name(code));
    }
  }
  return 0;
}

MANYPY_FUZZ_ZIP_MUTATOR
