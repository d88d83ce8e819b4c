#include "package.h"

#include <atomic>
#include <cstring>
#include <map>

#include "api_usage.h"
#include "error.h"

namespace manypy {

namespace {

std::atomic<uint64_t> g_next_id{1};

// Open packages by id, for interpreters asking for tensor records.
std::mutex g_registry_mu;
std::map<uint64_t, std::weak_ptr<Archive>>& registry() {
  static auto* packages = new std::map<uint64_t, std::weak_ptr<Archive>>();
  return *packages;
}

void copy_message(const std::string& text, char* out, size_t size) {
  if (size == 0) return;
  size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

// mpi_host_api.package_record: called by interpreters, from C, with their
// GIL held. No exception may leave it.
int package_record_for_interpreter(uint64_t package_id, const char* record, uint64_t nbytes,
                                   DLManagedTensor** out, char* error, size_t error_size) {
  try {
    std::shared_ptr<Archive> archive;
    {
      std::lock_guard<std::mutex> lock(g_registry_mu);
      auto it = registry().find(package_id);
      if (it != registry().end()) archive = it->second.lock();
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

Package::Package(std::shared_ptr<Pool> pool, std::shared_ptr<Archive> archive)
    : id_(g_next_id.fetch_add(1)), pool_(std::move(pool)), archive_(std::move(archive)) {
  // Before anything of the archive reaches an interpreter. (Only the
  // host-side fuzz target builds a package without a pool: it has no
  // interpreter for the archive to reach.)
  if (pool_) digest_ = pool_->trust().check(*archive_);
  // TorchScript modules inside the package are unpickled by libtorch's own
  // unpickler in the interpreter, which trusts its input (pickle_check.h).
  archive_->check_torch_pickles(".data/ts_code/");
  if (!archive_->has_record(".data/extern_modules")) {
    throw Error(Code::kNotAPackage,
                archive_->origin() +
                    " is a PyTorch archive but not a torch.package (it has no "
                    ".data/extern_modules record); a TorchScript archive loads with "
                    "manypy_script_load_file");
  }
  std::lock_guard<std::mutex> lock(g_registry_mu);
  registry()[id_] = archive_;
  api_usage::log("manypy.package.load");
}

Package::~Package() {
  opened_.for_each_done([this](Interpreter& interp) { interp.package_close(id_); });
  std::lock_guard<std::mutex> lock(g_registry_mu);
  registry().erase(id_);
}

void Package::ensure_open(Interpreter& interp, CallStop* stop) {
  // Opening imports nothing heavy but reads and checks the archive's code
  // records; one thread does it per interpreter while others for it wait.
  opened_.ensure(interp, stop, [this, stop](Interpreter& in) {
    // From here the archive's code may run in `in` for good: its modules
    // can patch the installed ones, which outlive this pool.
    in.ran_archive(digest_, archive_->origin());
    try {
      in.package_open(pool_->mode(), id_, archive_->data(), archive_->size(), stop);
    } catch (const Error& e) {
      throw e.prefixed(archive_->origin() + ": ");
    }
  });
}

}  // namespace manypy
