// Which archives a pool may load: an allow-list of SHA-256 digests and/or a
// caller's verification callback. Loading a torch.package runs its pickles,
// which are code; a pool that trusts only known digests runs only known code.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

namespace manypy {

class Archive;

using Sha256 = std::array<uint8_t, 32>;

// SHA-256 of `size` bytes (OpenSSL's).
Sha256 sha256(const void* data, size_t size);
// Lower-case hex, 64 characters.
std::string hex(const Sha256& digest);
// Parses 64 hex digits (either case); false if `text` is not that.
bool parse_sha256(const std::string& text, Sha256* out);

struct ArchiveTrust {
  // Returns whether to trust an archive with this digest; `origin` names it.
  using Verifier = std::function<bool(const Sha256& digest, const std::string& origin)>;

  std::set<Sha256> digests;
  std::shared_ptr<Verifier> verifier;  // shared by options and the pools made from them

  // Whether anything is checked at all (otherwise every archive loads).
  bool active() const { return !digests.empty() || verifier != nullptr; }
  // Throws Error(kUntrustedArchive) unless `archive`'s digest is on the list
  // or the verifier accepts it. Hashes the archive only when active.
  void check(const Archive& archive) const;
};

}  // namespace manypy
