// manypy_package: torch.package archives.
#include "archive.h"
#include "export_hook.h"
#include "handles.h"

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
    MANYPY_NOT_NULL(path);
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
    manypy::Value list = manypy::Value::container(manypy::ValueKind::kList);
    for (std::string& name : package->package->archive().records()) {
      list.items.push_back(manypy::Value::of_string(std::move(name)));
    }
    *out_list = manypy::capi::new_value(std::move(list));
    return nullptr;
  });
}

manypy_status* manypy_package_read_file(const manypy_package* package, const char* name,
                                        manypy_value** out_bytes) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(package);
    MANYPY_NOT_NULL(name);
    MANYPY_NOT_NULL(out_bytes);
    *out_bytes = manypy::capi::new_value(
        manypy::Value::of_bytes(package->package->archive().read(name)));
    return nullptr;
  });
}

}  // extern "C"

extern "C" {

manypy_status* manypy_package_save_file(const manypy_package* package, const char* path,
                                        const manypy_value* extra_files) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(package);
    MANYPY_NOT_NULL(path);
    std::vector<std::pair<std::string, std::string>> files;
    if (extra_files != nullptr) {
      const manypy::Value& dict = manypy::capi::value_of(extra_files);
      if (dict.kind != manypy::ValueKind::kDict) {
        return manypy::capi::invalid_argument(api_function, "extra_files must be a dict");
      }
      for (size_t k = 0; k < dict.items.size(); ++k) {
        const manypy::Value& file = dict.items[k];
        if (file.kind != manypy::ValueKind::kBytes && file.kind != manypy::ValueKind::kString) {
          return manypy::capi::invalid_argument(api_function,
                                                "extra files must be bytes or strings");
        }
        files.emplace_back(dict.keys[k], file.s);
      }
    }
    // The export hook stamps this archive too; the caller's files win.
    manypy::export_hook::collect(
        [](void* ctx, const char* name, const void* data, size_t size) {
          auto& list = *static_cast<std::vector<std::pair<std::string, std::string>>*>(ctx);
          for (const auto& file : list) {
            if (file.first == name) return;
          }
          list.emplace_back(name, std::string(static_cast<const char*>(data), size));
        },
        &files);
    package->package->archive().save_copy(path, files);
    return nullptr;
  });
}

}  // extern "C"
