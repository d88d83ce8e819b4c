// manypy_package: torch.package archives.
#include "archive.h"
#include "handles.h"
#include "runtime.h"

namespace {

manypy_status* make_package(manypy_pool* pool, std::shared_ptr<manypy::Archive> archive,
                            manypy_package** out_package) {
  auto handle = std::make_unique<manypy_package>();
  handle->package = std::make_shared<manypy::Package>(pool->pool, std::move(archive));
  *out_package = handle.release();
  return nullptr;
}

}  // namespace

extern "C" {

manypy_status* manypy_package_load_file(manypy_pool* pool, const char* path,
                                        manypy_package** out_package) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_PATH(path);
    MANYPY_NOT_NULL(out_package);
    return make_package(pool, manypy::Archive::open_file(path), out_package);
  });
}

manypy_status* manypy_package_load_bytes(manypy_pool* pool, const void* data, size_t size,
                                         manypy_package** out_package) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(pool);
    MANYPY_NOT_NULL(data);
    MANYPY_NOT_NULL(out_package);
    return make_package(pool, manypy::Archive::from_bytes(data, size), out_package);
  });
}

void manypy_package_free(manypy_package* package) { delete package; }

manypy_status* manypy_package_list_files(const manypy_package* package, manypy_value** out_list) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(package);
    MANYPY_NOT_NULL(out_list);
    *out_list = manypy::capi::new_value(package->package->archive().records_value());
    return nullptr;
  });
}

manypy_status* manypy_package_read_file(const manypy_package* package, const char* name,
                                        manypy_value** out_bytes) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(package);
    MANYPY_NOT_NULL(name);
    MANYPY_UTF8(name);
    MANYPY_NOT_NULL(out_bytes);
    *out_bytes =
        manypy::capi::new_value(manypy::Value::of_bytes(package->package->archive().read(name)));
    return nullptr;
  });
}

}  // extern "C"

extern "C" {

manypy_status* manypy_package_save_file(const manypy_package* package, const char* path,
                                        const manypy_value* extra_files) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(package);
    MANYPY_PATH(path);
    manypy::ExtraFiles files =
        manypy::extra_files_from(extra_files ? &manypy::capi::value_of(extra_files) : nullptr);
    // The export hook stamps this archive too; the caller's files win.
    manypy::Runtime::get().export_hook().add_to(&files);
    package->package->archive().save_copy(path, files);
    return nullptr;
  });
}

}  // extern "C"
