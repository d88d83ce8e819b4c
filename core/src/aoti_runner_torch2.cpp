// AOTInductor packages run by libtorch's own loader
// (torch::inductor::AOTIModelPackageLoader), torch 2.6 and newer.
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "aoti_runner.h"
#include "archive.h"
#include "error.h"
#include "ivalue_convert.h"

namespace manypy {

namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The compiled model checks each input's dtype, sizes, strides and device
// only when AOTI_RUNTIME_CHECK_INPUTS is set, read once per library at its
// first call. Unchecked, a tensor of the wrong shape is read out of bounds:
// wrong results or a crash. manypy sets it before the first package loads,
// unless the environment already says otherwise (docs/models.md).
void check_inputs_by_default() {
  static std::once_flag once;
  std::call_once(once, [] { setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0); });
}

// A compiled library needs "libtorch.so" and "libtorch_cpu.so" by those
// names, and has no search path of its own. libtorch.so is an umbrella that
// adds nothing a CPU model calls, but in the CUDA builds pip installs by
// default it needs libtorch_cuda.so and the CUDA libraries: about 240 MB of
// mappings a CPU package never uses. So the unpacked library's dependency
// on it is pointed at libtorch_cpu.so, which the host has loaded; the
// package's device was checked to be the CPU (aoti_package.cpp), and a
// symbol it needed from elsewhere would fail the load with a clear error.
// Returns whether the library still needs libtorch.so after that.
bool drop_umbrella(std::string& library) {
  redirect_needed(library, "libtorch.so", "libtorch_cpu.so");
  const std::vector<std::string> needed = needed_libraries(library);
  return std::find(needed.begin(), needed.end(), "libtorch.so") != needed.end();
}

// A library that still needs libtorch.so (one that does not need
// libtorch_cpu.so by name): the name must not be resolved by a search of
// the system's directories, which could load another torch beside this one
// (on Debian, python3-torch's 1.13) and crash the process as it
// initialises. Loading the libtorch.so beside the running libtorch_cpu.so
// first makes the name resolve to it.
void load_this_libtorch() {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&at::get_num_threads), &info) == 0 || !info.dli_fname)
      return;
    std::string dir = info.dli_fname;
    dir = dir.substr(0, dir.rfind('/') + 1);
    // Kept for the life of the process, as the libtorch_cpu.so it goes with.
    (void)dlopen((dir + "libtorch.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  });
}

// The package's records, extracted from the checked archive into a
// directory of this process's own (0700, under TMPDIR), for the loader to
// open: libtorch's loader takes an unpacked package as it takes a zip, so
// its own zip reader never sees the bytes, and the directory goes as soon
// as the model is loaded (its library stays mapped), whatever happens.
class ExtractedPackage {
 public:
  explicit ExtractedPackage(const Archive& archive, const AotiPackageInfo& info) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/manypy-pt2-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      throw Error(Code::kResourceExhausted, archive.origin() +
                                                ": cannot make a directory to unpack it in (" +
                                                pattern + "): " + std::strerror(errno));
    }
    dir_ = pattern;
    for (const std::string& name : info.records) {
      const std::filesystem::path file = std::filesystem::path(dir_) / name;
      std::error_code error;
      std::filesystem::create_directories(file.parent_path(), error);
      std::string bytes = read_listed_record(archive, name);
      if (name == info.library) needs_umbrella_ = drop_umbrella(bytes);
      std::ofstream out(file, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (error || !out.flush()) {
        throw Error(Code::kResourceExhausted, archive.origin() + ": cannot unpack " + name +
                                                  " into " + dir_ + " (is the disk full?)");
      }
    }
  }
  ~ExtractedPackage() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ExtractedPackage(const ExtractedPackage&) = delete;
  ExtractedPackage& operator=(const ExtractedPackage&) = delete;
  const std::string& dir() const { return dir_; }
  // Whether its library still needs libtorch.so (drop_umbrella).
  bool needs_umbrella() const { return needs_umbrella_; }

 private:
  std::string dir_;
  bool needs_umbrella_ = false;
};

Error load_error(const std::string& origin, const std::string& text) {
  const std::string why = first_line(text);
  for (const char* sign : {"dlopen", "undefined symbol", "cannot open shared object",
                           "wrong ELF class", "invalid ELF header"}) {
    if (text.find(sign) != std::string::npos) {
      return Error(Code::kLoader, origin +
                                      ": its compiled library does not load (built by "
                                      "another torch, or a library it needs is missing): " +
                                      why);
    }
  }
  return Error(Code::kBadArchive, origin + " cannot be loaded as an AOTInductor package: " + why);
}

Error run_error(const std::string& text) {
  const std::string why = first_line(text);
  if (why.find("input_handles[") != std::string::npos &&
      why.find("unmatched") != std::string::npos) {
    return Error(Code::kBadTensor,
                 "the compiled model's " + why.substr(why.find("input_handles[")));
  }
  return Error(Code::kPython, "AOTInductor model: " + why, "RuntimeError", text);
}

class TorchAotiRunner final : public AotiRunner {
 public:
  TorchAotiRunner(const Archive& archive, const AotiPackageInfo& info) {
    check_inputs_by_default();
    ExtractedPackage package(archive, info);
    if (package.needs_umbrella()) load_this_libtorch();
    const size_t runners = std::max(1u, std::thread::hardware_concurrency());
    try {
      loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          package.dir(), info.model_name, /*run_single_threaded=*/false, runners);
      const std::vector<std::string> spec = loader_->get_call_spec();
      if (spec.size() != 2) {
        throw Error(Code::kBadArchive, archive.origin() + ": the compiled model has no call spec");
      }
      input_spec_ = spec[0];
      output_spec_ = spec[1];
    } catch (const c10::Error& e) {
      throw load_error(archive.origin(), e.what_without_backtrace());
    } catch (const Error&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      throw load_error(archive.origin(), e.what());
    }
  }

  std::string input_spec() const override { return input_spec_; }
  std::string output_spec() const override { return output_spec_; }

  std::vector<Value> run(const std::vector<const Value*>& inputs) override {
    // Compiled kernels parallelise with OpenMP teams as wide as the calling
    // thread's setting: give this thread the host's intra-op threads
    // (manypy_script_set_intra_op_threads), as TorchScript's operators get.
    at::internal::lazy_init_num_threads();
    c10::InferenceMode inference;
    std::vector<at::Tensor> tensors;
    tensors.reserve(inputs.size());
    for (const Value* input : inputs) {
      at::Tensor t = to_ivalue(*input).toTensor();
      // Compiled kernels index inputs as the example inputs were laid out
      // (contiguous): a view with other strides is copied once.
      if (!t.is_contiguous()) t = t.contiguous();
      tensors.push_back(std::move(t));
    }
    std::vector<at::Tensor> outputs;
    try {
      outputs = loader_->run(tensors);
    } catch (const c10::Error& e) {
      throw run_error(e.what_without_backtrace());
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      throw run_error(e.what());
    }
    std::vector<Value> values;
    values.reserve(outputs.size());
    for (at::Tensor& t : outputs) values.push_back(from_ivalue(c10::IValue(std::move(t))));
    return values;
  }

 private:
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  std::string input_spec_, output_spec_;
};

}  // namespace

std::string aoti_unavailable_reason() { return {}; }

std::unique_ptr<AotiRunner> open_aoti_runner(const Archive& archive, const AotiPackageInfo& info) {
  return std::make_unique<TorchAotiRunner>(archive, info);
}

}  // namespace manypy
