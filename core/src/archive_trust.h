// Which archives a pool may load: an allow-list of SHA-256 digests and/or a
// caller's verification callback. Loading a torch.package runs its pickles,
// which are code; a pool that trusts only known digests runs only known code.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
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
  // Whether an archive with this digest may run: on the list, or accepted
  // by the verifier (asked with `origin`). True when not active.
  bool accepts(const Sha256& digest, const std::string& origin) const;
  // Throws Error(kUntrustedArchive) unless `archive`'s digest is on the list
  // or the verifier accepts it. Hashes the archive only when active, and
  // returns its digest then (nullopt when nothing was checked).
  std::optional<Sha256> check(const Archive& archive) const;
};

// The host trust: what every host load (TorchScript and AOTInductor, from
// files and bytes) checks, whatever trust it is given: a process-wide floor
// that code loading a model cannot lower. Replaced by each call; nullptr
// removes it. Thread safe: a load already past its check keeps the one it
// had.
void set_host_archive_trust(std::shared_ptr<const ArchiveTrust> trust);
std::shared_ptr<const ArchiveTrust> host_archive_trust();

// Throws Error(kUntrustedArchive) unless both the trust given to a host load
// (nullptr or inactive: none) and the host trust (if set) accept `archive`.
// Hashes it once, and only when one of them checks anything.
void check_host_load(const Archive& archive, const ArchiveTrust* given);

// What code an interpreter has run from archives, over its whole life
// (interpreters outlive pools, and keep the modules of their installation
// from one pool to the next, with whatever a model patched in them). An
// interpreter may serve a pool only if the pool trusts all of it.
class TrustHistory {
 public:
  // An archive's code may run in the interpreter: `digest` is what the
  // pool's trust checked, nullopt if its pool checked nothing.
  void ran(const std::optional<Sha256>& digest, const std::string& origin);
  // Code the host ran (manypy_pool_exec, _eval) in a pool that checks
  // nothing: what it patched stays as an archive's would, and such a pool
  // may run whatever its callers hand it, so it counts as an unchecked
  // archive. Host code in a pool that checks is the host's own under that
  // pool's policy, and is not recorded.
  void ran_unchecked_host_code() { ran_unchecked_ = true; }
  // Whether every archive whose code ran here is one `trust` accepts: any
  // history for a pool that checks nothing; none that ran unchecked code
  // for a pool that checks.
  bool trusted_by(const ArchiveTrust& trust) const;

 private:
  bool ran_unchecked_ = false;
  std::map<Sha256, std::string> ran_;  // digest -> the origin it loaded from
};

}  // namespace manypy
