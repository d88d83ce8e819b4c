// Reading and copying any PyTorch archive (TorchScript, torch.package, an
// AOTInductor package) without Python, and the process-wide export hook.
#include "archive.h"

#include "handles.h"
#include "runtime.h"

extern "C" {

manypy_status* manypy_archive_list_files(const char* path, manypy_value** out_list) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_PATH(path);
    MANYPY_NOT_NULL(out_list);
    *out_list = manypy::capi::new_value(manypy::Archive::open_file(path)->records_value());
    return nullptr;
  });
}

manypy_status* manypy_archive_read_file(const char* path, const char* name,
                                        manypy_value** out_bytes) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_PATH(path);
    MANYPY_NOT_NULL(name);
    MANYPY_UTF8(name);
    MANYPY_NOT_NULL(out_bytes);
    *out_bytes = manypy::capi::new_value(
        manypy::Value::of_bytes(manypy::Archive::open_file(path)->read(name)));
    return nullptr;
  });
}

manypy_status* manypy_archive_save_copy(const char* path, const char* new_path,
                                        const manypy_value* extra_files) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_PATH(path);
    MANYPY_PATH(new_path);
    manypy::ExtraFiles files =
        manypy::extra_files_from(extra_files ? &manypy::capi::value_of(extra_files) : nullptr);
    // The export hook stamps this archive too; the caller's files win.
    manypy::Runtime::get().export_hook().add_to(&files);
    manypy::Archive::open_file(path)->save_copy(new_path, files);
    return nullptr;
  });
}

manypy_status* manypy_set_export_hook(manypy_export_hook_fn hook, void* user_data,
                                      void (*free_user_data)(void*)) {
  return manypy::capi::fence(__func__, [&](const char*) -> manypy_status* {
    if (hook == nullptr) {
      manypy::Runtime::get().export_hook().set(nullptr);
      if (free_user_data) free_user_data(user_data);
      return nullptr;
    }
    // The user data lives as long as the hook: freed when it is replaced.
    std::shared_ptr<void> owned(user_data, [free_user_data](void* p) {
      if (free_user_data) free_user_data(p);
    });
    manypy::Runtime::get().export_hook().set([hook, owned]() {
      manypy_value* files = hook(owned.get());
      if (files == nullptr) return manypy::Value::none();
      manypy::Value result = std::move(manypy::capi::value_of(files));
      manypy_value_free(files);
      return result;
    });
    return nullptr;
  });
}

}  // extern "C"
