#include "archive.h"

#include <c10/util/Exception.h>
#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "error.h"
#include "pickle_check.h"
#include "torchscript_debug_check.h"
#include "value.h"
#include "zip_index.h"

namespace manypy {

namespace {

// The first line of a c10::Error, without libtorch's backtrace.
std::string torch_message(const c10::Error& e) {
  std::string text = e.what_without_backtrace();
  return text.substr(0, text.find('\n'));
}

// libtorch's MemoryReadAdapter copies whatever it is asked for, past the end
// of the buffer too. This one returns what is there, so a reader that trusts
// a bad offset gets a short read, and an error, instead of a crash.
class BoundedReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  BoundedReadAdapter(std::shared_ptr<const Archive> owner, const void* data, size_t size)
      : owner_(std::move(owner)), data_(static_cast<const char*>(data)), size_(size) {}
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= size_) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - pos));
    std::memcpy(buf, data_ + pos, n);
    return n;
  }

 private:
  std::shared_ptr<const Archive> owner_;  // null while the archive opens itself
  const char* data_;
  size_t size_;
};

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

namespace {

// Reads all `size` bytes of `fd` into `out` (pread: the file offset is not
// shared with anyone). A short read means the file shrank under us.
void read_exactly(int fd, char* out, size_t size, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    ssize_t n =
        pread(fd, out + done, std::min<size_t>(size - done, 1 << 30), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw Error(Code::kBadArchive, "cannot read " + path + ": " + std::strerror(errno));
    }
    if (n == 0) {
      throw Error(Code::kBadArchive, path + " shrank from " + std::to_string(size) + " to " +
                                         std::to_string(done) +
                                         " bytes while it was read: "
                                         "it is being replaced; load it again once it is whole");
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::shared_ptr<Archive> Archive::open_file(const std::string& path) {
  if (path.empty()) throw Error(Code::kInvalidArgument, "path must not be empty");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    throw Error(err == ENOENT ? Code::kNotFound : Code::kBadArchive,
                "cannot open " + path + ": " + std::strerror(err));
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw Error(Code::kBadArchive, path + " is not a regular file");
  }
  // The archive is read into memory of its own, not mapped: what the allow-
  // list hashes is then exactly what every interpreter reads later (pickles
  // at load_pickle, and again at each lazy replica), and a file truncated or
  // overwritten after the load (`cp new.pt model.pt` truncates first) can
  // neither SIGBUS the host nor change a loaded model's weights. The cost
  // is the archive's size in private memory, held once however many
  // interpreters share it (docs/models.md, "Memory").
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    // Anonymous and writable: a model that writes to a weight in place gets
    // what it would get in Python, and the file never changes.
    data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) {
      int err = errno;
      throw Error(Code::kResourceExhausted, "cannot allocate " + std::to_string(size) +
                                                " bytes for " + path + ": " + std::strerror(err));
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  std::shared_ptr<Archive> archive(new Archive(path, data, size, size > 0));
  read_exactly(fd, static_cast<char*>(data), size, path);
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
  index_ = std::make_unique<ZipIndex>(data_, size_, origin_);
  try {
    reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(
        std::make_shared<BoundedReadAdapter>(nullptr, data_, size_));
  } catch (const c10::Error& e) {
    std::string why = torch_message(e);
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
  } catch (const std::logic_error& e) {
    // std::stoull of the version record: not a number, or one beyond 64 bits.
    throw Error(Code::kUnsupportedVersion,
                origin_ + " has a version record libtorch cannot parse (" + e.what() + ")");
  }
}

std::shared_ptr<caffe2::serialize::ReadAdapterInterface> Archive::read_adapter() const {
  return std::make_shared<BoundedReadAdapter>(shared_from_this(), data_, size_);
}

std::vector<std::string> Archive::records() const {
  try {
    return reader_->getAllRecords();
  } catch (const c10::Error& e) {  // e.g. a record outside the archive's folder
    throw Error(Code::kBadArchive, origin_ + ": cannot list its records: " + torch_message(e));
  }
}

Value Archive::records_value() const {
  Value list = Value::container(ValueKind::kList);
  for (std::string& name : records()) list.append(Value::of_string(std::move(name)));
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

bool Archive::has_record(const std::string& name) const {
  try {
    return reader_->hasRecord(name);
  } catch (const c10::Error& e) {
    throw Error(Code::kBadArchive,
                origin_ + ": cannot look up record '" + name + "': " + torch_message(e));
  }
}

std::string Archive::read(const std::string& name) const {
  if (!has_record(name)) {
    throw Error(Code::kNoSuchName, origin_ + " has no record '" + name + "'");
  }
  try {
    auto [ptr, size] = reader_->getRecord(name);
    return std::string(static_cast<const char*>(ptr.get()), size);
  } catch (const c10::Error& e) {
    throw Error(Code::kBadArchive,
                origin_ + ": cannot read record '" + name + "': " + torch_message(e));
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(Code::kBadArchive, origin_ + ": cannot read record '" + name + "': " + e.what());
  }
}

void Archive::check_torch_pickles(const std::string& prefix) const {
  for (const std::string& name : records()) {
    if (name.rfind(prefix, 0) != 0 || !is_torch_pickle_record(name)) continue;
    if (!has_record(name)) {
      throw Error(Code::kBadArchive, origin_ + " lists record '" + name + "' but does not hold it");
    }
    const std::string bytes = read(name);
    check_pickle(bytes, origin_ + ": " + name);
    if (is_torch_debug_record(name)) check_torchscript_debug_record(bytes, origin_ + ": " + name);
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
  const ZipEntry* entry = index_->find_record(name);
  if (entry == nullptr || !has_record(name)) {
    throw Error(Code::kNoSuchName, origin_ + " has no record '" + name + "'");
  }
  // Storages are mapped in place: a compressed one would be read as its
  // compressed bytes. torch never writes them compressed; refuse them.
  if (entry->method != kZipStored) {
    throw Error(Code::kBadArchive, origin_ + ": storage record '" + name +
                                       "' is compressed (zip method " +
                                       std::to_string(entry->method) +
                                       "); manypy maps storages in place and needs them stored");
  }
  if (entry->size != nbytes) {
    throw Error(Code::kBadArchive, origin_ + ": storage record '" + name + "' holds " +
                                       std::to_string(entry->size) +
                                       " bytes but its tensor "
                                       "views " +
                                       std::to_string(nbytes));
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
