#include "archive.h"

#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <c10/util/Exception.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "error.h"
#include "value.h"

namespace manypy {

namespace {

// The first line of a c10::Error, without libtorch's backtrace.
std::string torch_message(const c10::Error& e) {
  std::string text = e.what_without_backtrace();
  return text.substr(0, text.find('\n'));
}

bool starts_like_zip(const void* data, size_t size) {
  return size >= 4 && std::memcmp(data, "PK\x03\x04", 4) == 0;
}

// The uint8 view handed to interpreters by record_view.
struct RecordView {
  std::shared_ptr<Archive> archive;
  int64_t length;
  DLManagedTensor managed{};
};

void delete_record_view(DLManagedTensor* managed) {
  delete static_cast<RecordView*>(managed->manager_ctx);
}

}  // namespace

Archive::Archive(std::string origin, void* data, size_t size, bool mapped)
    : origin_(std::move(origin)), data_(data), size_(size), mapped_(mapped) {}

Archive::~Archive() {
  reader_.reset();
  if (mapped_) {
    munmap(data_, size_);
  } else {
    std::free(data_);
  }
}

std::shared_ptr<Archive> Archive::open_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    throw Error(err == ENOENT ? Code::kNotFound : Code::kBadArchive,
                "cannot open " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw Error(Code::kBadArchive, path + " is not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    // Private and writable: reads share the page cache; a model that writes
    // to its weights gets private copies of those pages, never the file.
    data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      int err = errno;
      close(fd);
      throw Error(Code::kResourceExhausted, "cannot map " + path + ": " + std::strerror(err));
    }
  }
  close(fd);
  std::shared_ptr<Archive> archive(new Archive(path, data, size, size > 0));
  archive->open_reader();
  return archive;
}

std::shared_ptr<Archive> Archive::from_bytes(const void* data, size_t size) {
  // 64-byte aligned, as torch aligns tensor records inside archives.
  void* copy = std::aligned_alloc(64, ((size + 63) / 64) * 64 + 64);
  if (copy == nullptr) throw std::bad_alloc();
  if (size > 0) std::memcpy(copy, data, size);
  std::shared_ptr<Archive> archive(new Archive("<bytes>", copy, size, false));
  archive->open_reader();
  return archive;
}

void Archive::open_reader() {
  try {
    reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(
        std::make_shared<caffe2::serialize::MemoryReadAdapter>(data_, static_cast<off_t>(size_)));
  } catch (const c10::Error& e) {
    std::string why = torch_message(e);
    if (why.find("central directory") != std::string::npos) {
      throw Error(Code::kBadArchive,
                  origin_ + (starts_like_zip(data_, size_)
                                 ? " is a truncated or corrupt zip archive (" + why + ")"
                                 : " is not a zip archive (" + why + ")"));
    }
    if (why.find("supported version") != std::string::npos) {
      throw Error(Code::kUnsupportedVersion,
                  origin_ + " has an archive format this libtorch cannot read: " + why);
    }
    if (why.find("not in a subdirectory") != std::string::npos ||
        why.find("file not found") != std::string::npos) {
      throw Error(Code::kNotAPackage,
                  origin_ + " is a zip archive but not a PyTorch archive (" + why + ")");
    }
    throw Error(Code::kBadArchive, origin_ + " cannot be read: " + why);
  }
}

std::vector<std::string> Archive::records() const { return reader_->getAllRecords(); }

Value Archive::records_value() const {
  Value list = Value::container(ValueKind::kList);
  for (std::string& name : records()) list.items.push_back(Value::of_string(std::move(name)));
  return list;
}

ExtraFiles extra_files_from(const Value* dict) {
  ExtraFiles files;
  if (dict == nullptr) return files;
  if (dict->kind != ValueKind::kDict) {
    throw Error(Code::kInvalidArgument,
                std::string("extra_files must be a dict, not ") + kind_name(dict->kind));
  }
  for (size_t k = 0; k < dict->items.size(); ++k) {
    const Value& file = dict->items[k];
    if (file.kind != ValueKind::kBytes && file.kind != ValueKind::kString) {
      throw Error(Code::kInvalidArgument, "extra file '" + dict->keys[k] +
                                              "' must be bytes or a string, not " +
                                              kind_name(file.kind));
    }
    files.emplace_back(dict->keys[k], file.s);
  }
  return files;
}

bool Archive::has_record(const std::string& name) const { return reader_->hasRecord(name); }

std::string Archive::read(const std::string& name) const {
  if (!reader_->hasRecord(name)) {
    throw Error(Code::kNoSuchName, origin_ + " has no record '" + name + "'");
  }
  try {
    auto [ptr, size] = reader_->getRecord(name);
    return std::string(static_cast<const char*>(ptr.get()), size);
  } catch (const c10::Error& e) {
    throw Error(Code::kBadArchive, origin_ + ": cannot read record '" + name + "': " +
                                       torch_message(e));
  }
}

void Archive::save_copy(const std::string& path, const ExtraFiles& extra_files) const {
  std::set<std::string> replaced;
  for (const auto& file : extra_files) replaced.insert("extra/" + file.first);
  try {
    caffe2::serialize::PyTorchStreamWriter writer(path);
    writer.setMinVersion(reader_->version());
    for (const std::string& name : reader_->getAllRecords()) {
      // The writer adds the version record itself; replaced files come last.
      if (name == ".data/version" || name == "version" || replaced.count(name)) continue;
      auto [ptr, size] = reader_->getRecord(name);
      writer.writeRecord(name, ptr.get(), size);
    }
    for (const auto& [name, data] : extra_files) {
      writer.writeRecord("extra/" + name, data.data(), data.size());
    }
    writer.writeEndOfFile();
  } catch (const c10::Error& e) {
    throw Error(Code::kNotFound, "cannot write " + path + ": " + torch_message(e));
  }
}

DLManagedTensor* Archive::record_view(const std::string& name, size_t nbytes) {
  if (!reader_->hasRecord(name)) {
    throw Error(Code::kNoSuchName, origin_ + " has no record '" + name + "'");
  }
  size_t offset = 0;
  try {
    offset = reader_->getRecordOffset(name);
  } catch (const c10::Error& e) {
    throw Error(Code::kBadArchive, origin_ + ": record '" + name + "': " + torch_message(e));
  }
  if (offset > size_ || nbytes > size_ - offset) {
    throw Error(Code::kBadArchive, origin_ + ": record '" + name + "' needs " +
                                       std::to_string(nbytes) + " bytes at offset " +
                                       std::to_string(offset) + " but the archive is only " +
                                       std::to_string(size_) + " bytes");
  }
  auto* view = new RecordView();
  view->archive = shared_from_this();
  view->length = static_cast<int64_t>(nbytes);
  DLTensor& t = view->managed.dl_tensor;
  t.data = static_cast<char*>(data_) + offset;
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = {kDLUInt, 8, 1};
  t.shape = &view->length;
  t.strides = nullptr;
  t.byte_offset = 0;
  view->managed.manager_ctx = view;
  view->managed.deleter = delete_record_view;
  return &view->managed;
}

}  // namespace manypy
