// A PyTorch zip archive in host memory, read with libtorch's own reader
// (caffe2::serialize::PyTorchStreamReader) once libzip has checked its
// structure (zip_index.h), and always through a read adapter that never
// reads past the end: no zip code of ours.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace caffe2::serialize {
class PyTorchStreamReader;
class ReadAdapterInterface;
}  // namespace caffe2::serialize

namespace manypy {

struct Value;
class ZipIndex;

// Extra files given through the C API: a dict of name -> bytes or string (or
// nullptr for none). Throws Error(kInvalidArgument) for anything else.
using ExtraFiles = std::vector<std::pair<std::string, std::string>>;
ExtraFiles extra_files_from(const Value* dict);

class Archive : public std::enable_shared_from_this<Archive> {
 public:
  // Reads the whole file into private memory once, so that nothing done to
  // the file afterwards (a truncation, an overwrite in place) reaches the
  // archive: what was checked is what runs. Throws Error: kInvalidArgument
  // (an empty path), kNotFound, kBadArchive (also: the file shrank while it
  // was read), kUnsupportedVersion, kNotAPackage (a zip that is no PyTorch
  // archive), kResourceExhausted.
  static std::shared_ptr<Archive> open_file(const std::string& path);
  // Copies `size` bytes. Same errors.
  static std::shared_ptr<Archive> from_bytes(const void* data, size_t size);
  ~Archive();
  Archive(const Archive&) = delete;
  Archive& operator=(const Archive&) = delete;

  const void* data() const { return data_; }
  size_t size() const { return size_; }
  // "identity.pt" or "<bytes>", for messages.
  const std::string& origin() const { return origin_; }

  std::vector<std::string> records() const;
  // The same as a list value of strings.
  Value records_value() const;
  // A reader of this archive's bytes for libtorch (torch::jit::load): never
  // reads past the end, and keeps the archive alive.
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> read_adapter() const;
  bool has_record(const std::string& name) const;
  // A record's bytes (copied). Throws Error(kNoSuchName) if absent.
  std::string read(const std::string& name) const;
  // Throws Error(BAD_ARCHIVE) unless every pickle libtorch's own unpickler
  // would read among the records whose names start with `prefix` ("" for
  // all) is well formed (pickle_check.h, torchscript_debug_check.h). A
  // listed record that cannot be found is BAD_ARCHIVE too: the archive
  // contradicts itself.
  void check_torch_pickles(const std::string& prefix) const;

  // Writes a copy of this archive to `path` (libtorch's PyTorchStreamWriter)
  // with `extra_files` added as "extra/<name>"; a name already in the
  // archive is replaced. Throws Error (kNotFound for an unwritable path).
  void save_copy(const std::string& path, const ExtraFiles& extra_files) const;

  // Record `name` (a tensor storage) as a uint8 DLPack tensor over this
  // archive's memory (no copy); keeps the archive alive until its deleter
  // runs. Throws Error(kBadArchive) unless the record is stored (not
  // compressed) and holds exactly `nbytes` bytes, what its tensor views.
  DLManagedTensor* record_view(const std::string& name, size_t nbytes);

 private:
  Archive(std::string origin, void* data, size_t size, bool mapped);
  void open_reader();

  std::string origin_;
  void* data_;
  size_t size_;
  bool mapped_;  // data_ is an anonymous mapping (else aligned_alloc's)
  std::unique_ptr<ZipIndex> index_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
};

}  // namespace manypy
