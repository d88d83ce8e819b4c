// Which archives may run: the allow-list and verifier of a pool's options,
// and manypy_archive_trust, the same for archives loaded without a pool
// (TorchScript on the host). One implementation serves both.
#include "handles.h"

namespace {

// `handle` names the caller's argument that gave `trust` (NULL if it was).
manypy_status* add_sha256(const char* function, const char* handle, manypy::ArchiveTrust* trust,
                          const char* hex_digest) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    if (trust == nullptr) {
      return manypy::capi::invalid_argument(api_function,
                                            (std::string(handle) + " must not be NULL").c_str());
    }
    MANYPY_NOT_NULL(hex_digest);
    manypy::Sha256 digest;
    if (!manypy::parse_sha256(hex_digest, &digest)) {
      return manypy::capi::invalid_argument(api_function,
                                            "hex_digest must be 64 hexadecimal digits");
    }
    trust->digests.insert(digest);
    return nullptr;
  });
}

// As add_sha256; a NULL handle is reported after user_data is owned, so
// that free_user_data runs exactly once whatever happens.
manypy_status* set_verifier(const char* function, const char* handle, manypy::ArchiveTrust* trust,
                            manypy_archive_verifier_fn verifier, void* user_data,
                            void (*free_user_data)(void*)) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    // Owned from here on: freed when the last holder of the verifier goes,
    // or here if anything fails.
    const auto owned = manypy::capi::own_user_data(user_data, free_user_data);
    if (trust == nullptr) {
      return manypy::capi::invalid_argument(api_function,
                                            (std::string(handle) + " must not be NULL").c_str());
    }
    if (verifier == nullptr) {
      trust->verifier = nullptr;
      return nullptr;
    }
    trust->verifier = std::make_shared<manypy::ArchiveTrust::Verifier>(
        [verifier, owned](const manypy::Sha256& digest, const std::string& origin) {
          return verifier(digest.data(), origin.c_str(), owned->data) != 0;
        });
    return nullptr;
  });
}

manypy::ArchiveTrust* trust_of(manypy_pool_options* options) {
  return options ? &options->options.trust : nullptr;
}

manypy::ArchiveTrust* trust_of(manypy_archive_trust* trust) {
  return trust ? &trust->trust : nullptr;
}

}  // namespace

extern "C" {

manypy_status* manypy_pool_options_add_trusted_sha256(manypy_pool_options* options,
                                                      const char* hex_digest) {
  return add_sha256(__func__, "options", trust_of(options), hex_digest);
}

manypy_status* manypy_pool_options_set_archive_verifier(manypy_pool_options* options,
                                                        manypy_archive_verifier_fn verifier,
                                                        void* user_data,
                                                        void (*free_user_data)(void*)) {
  return set_verifier(__func__, "options", trust_of(options), verifier, user_data, free_user_data);
}

manypy_status* manypy_pool_options_set_archive_trust(manypy_pool_options* options,
                                                     const manypy_archive_trust* trust) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(options);
    options->options.trust = trust ? trust->trust : manypy::ArchiveTrust{};
    return nullptr;
  });
}

manypy_archive_trust* manypy_archive_trust_new(void) {
  return new (std::nothrow) manypy_archive_trust();
}

void manypy_archive_trust_free(manypy_archive_trust* trust) { delete trust; }

manypy_status* manypy_archive_trust_add_sha256(manypy_archive_trust* trust,
                                               const char* hex_digest) {
  return add_sha256(__func__, "trust", trust_of(trust), hex_digest);
}

manypy_status* manypy_archive_trust_set_verifier(manypy_archive_trust* trust,
                                                 manypy_archive_verifier_fn verifier,
                                                 void* user_data, void (*free_user_data)(void*)) {
  return set_verifier(__func__, "trust", trust_of(trust), verifier, user_data, free_user_data);
}

}  // extern "C"
