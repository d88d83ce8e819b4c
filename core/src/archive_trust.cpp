#include "archive_trust.h"

#include <openssl/evp.h>

#include <mutex>

#include "archive.h"
#include "error.h"

namespace manypy {

Sha256 sha256(const void* data, size_t size) {
  Sha256 digest{};
  unsigned int length = 0;
  if (EVP_Digest(data, size, digest.data(), &length, EVP_sha256(), nullptr) != 1 ||
      length != digest.size()) {
    throw Error(Code::kInternal, "OpenSSL could not compute a SHA-256 digest");
  }
  return digest;
}

std::string hex(const Sha256& digest) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text;
  for (uint8_t byte : digest) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

bool parse_sha256(const std::string& text, Sha256* out) {
  if (text.size() != 64) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t k = 0; k < 32; ++k) {
    int hi = nibble(text[2 * k]), lo = nibble(text[2 * k + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[k] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

bool ArchiveTrust::accepts(const Sha256& digest, const std::string& origin) const {
  if (!active() || digests.count(digest)) return true;
  return verifier != nullptr && (*verifier)(digest, origin);
}

namespace {

Error untrusted(const Archive& archive, const Sha256& digest, const std::string& whose,
                const ArchiveTrust& trust) {
  return Error(Code::kUntrustedArchive,
               archive.origin() + " has SHA-256 " + hex(digest) + ", which " + whose +
                   " does not trust (not on its allow-list" +
                   (trust.verifier ? ", and refused by its verifier)" : ")") +
                   "; nothing of it was run");
}

}  // namespace

std::optional<Sha256> ArchiveTrust::check(const Archive& archive) const {
  if (!active()) return std::nullopt;
  const Sha256 digest = sha256(archive.data(), archive.size());
  if (accepts(digest, archive.origin())) return digest;
  throw untrusted(archive, digest, "this pool", *this);
}

namespace {
std::mutex host_trust_mu;
std::shared_ptr<const ArchiveTrust> host_trust;
}  // namespace

void set_host_archive_trust(std::shared_ptr<const ArchiveTrust> trust) {
  {
    std::lock_guard<std::mutex> lock(host_trust_mu);
    host_trust.swap(trust);
  }
  // `trust` is now the old one: it (and its verifier's user data) goes
  // here, outside the lock.
}

std::shared_ptr<const ArchiveTrust> host_archive_trust() {
  std::lock_guard<std::mutex> lock(host_trust_mu);
  return host_trust;
}

void check_host_load(const Archive& archive, const ArchiveTrust* given) {
  const std::shared_ptr<const ArchiveTrust> host = host_archive_trust();
  const bool check_given = given != nullptr && given->active();
  const bool check_host = host != nullptr && host->active();
  if (!check_given && !check_host) return;
  const Sha256 digest = sha256(archive.data(), archive.size());
  if (check_given && !given->accepts(digest, archive.origin())) {
    throw untrusted(archive, digest, "the trust given to this load", *given);
  }
  if (check_host && !host->accepts(digest, archive.origin())) {
    throw untrusted(archive, digest, "the host trust (manypy_set_host_archive_trust)", *host);
  }
}

void TrustHistory::ran(const std::optional<Sha256>& digest, const std::string& origin) {
  if (digest) {
    ran_.emplace(*digest, origin);
  } else {
    ran_unchecked_ = true;
  }
}

bool TrustHistory::trusted_by(const ArchiveTrust& trust) const {
  if (!trust.active()) return true;
  if (ran_unchecked_) return false;
  for (const auto& [digest, origin] : ran_) {
    if (!trust.accepts(digest, origin)) return false;
  }
  return true;
}

}  // namespace manypy
