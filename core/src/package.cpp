#include "package.h"

#include "error.h"
#include "runtime.h"

namespace manypy {

Package::Package(std::shared_ptr<Pool> pool, std::shared_ptr<Archive> archive)
    : id_(Runtime::get().open_archives().new_id()),
      pool_(std::move(pool)),
      archive_(std::move(archive)) {
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
  Runtime::get().open_archives().add(id_, archive_);
  Runtime::get().api_usage().log("manypy.package.load");
}

Package::~Package() {
  if (pool_) {
    opened_.for_each_done([this](Interpreter& interp) {
      pool_->clean_up(interp, [this](Interpreter& in) { in.package_close(id_); });
    });
  }
  Runtime::get().open_archives().remove(id_);
}

void Package::ensure_open(Interpreter& interp, CallStop* stop) {
  // Opening imports nothing heavy but reads and checks the archive's code
  // records; one thread does it per interpreter while others for it wait.
  opened_.ensure(interp, stop, [this, stop](Interpreter& in) {
    // From here the archive's code may run in `in` for good: its modules
    // can patch the installed ones, which outlive this pool.
    in.ran_archive(digest_, archive_->origin());
    try {
      in.package_open(id_, archive_->data(), archive_->size(), stop);
    } catch (const Error& e) {
      throw e.prefixed(archive_->origin() + ": ");
    }
  });
}

}  // namespace manypy
