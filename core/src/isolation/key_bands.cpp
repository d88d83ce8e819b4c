#include "isolation/key_bands.h"

#include <pthread.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "error.h"

namespace manypy::isolation {

namespace {

constexpr unsigned kRegionKeys = KeyBands::kKeysMax - KeyBands::kHostKeys;
constexpr unsigned kAnchors = kRegionKeys / KeyBands::kBlock;
constexpr unsigned kKeysPerBand = (kRegionKeys - kAnchors) / KeyBands::kBands;

bool is_anchor(unsigned key) { return key % KeyBands::kBlock == 0; }

// A value no one reads; it only has to be non-NULL so that the block holding
// it is allocated by the host libc.
char anchor_dummy;

}  // namespace

KeyBands::KeyBands() {
  static_assert(KeyBands::kHostKeys % KeyBands::kBlock == 0);
  bands_.resize(kBands);
  band_blocks_.assign(kBands, 0);
  unsigned band = 0;
  for (unsigned key = kHostKeys; key < kKeysMax && band < kBands; ++key) {
    if (is_anchor(key)) continue;
    bands_[band].push_back(key);
    band_blocks_[band] |= 1u << (key / kBlock);
    if (bands_[band].size() == kKeysPerBand) ++band;
  }

  // Claim every free key in the host libc; keep those in the region.
  std::set<unsigned> claimed;
  std::vector<pthread_key_t> host_band_keys;
  for (;;) {
    pthread_key_t key;
    if (pthread_key_create(&key, nullptr) != 0) break;
    if (key >= kHostKeys) {
      claimed.insert(key);
    } else {
      host_band_keys.push_back(key);
    }
  }
  for (pthread_key_t key : host_band_keys) pthread_key_delete(key);

  for (unsigned b = 0; b < kBands; ++b) {
    bool ok = true;
    for (unsigned key : bands_[b]) ok = ok && claimed.count(key);
    for (unsigned block = 0; block < 32; ++block) {
      if (band_blocks_[b] & (1u << block)) ok = ok && claimed.count(block * kBlock);
    }
    if (ok) usable_.push_back(b);
  }
}

void KeyBands::fence_namespace(unsigned band, KeyCreateFn create, KeyDeleteFn del) const {
  const std::vector<unsigned>& keys = bands_.at(band);
  std::set<unsigned> mine(keys.begin(), keys.end());
  unsigned created = 0;
  for (;;) {
    unsigned key = 0;
    int rc = create(&key, nullptr);
    if (rc == EAGAIN) break;
    if (rc != 0) {
      throw Error(Code::kLoader, std::string("pthread_key_create in a new namespace failed: ") +
                                     std::strerror(rc));
    }
    ++created;
  }
  // A fresh namespace's libc has handed out nothing yet; if it had, one of
  // its keys could already sit outside the band.
  if (created != kKeysMax) {
    throw Error(Code::kInternal, "a new namespace's libc already held " +
                                     std::to_string(kKeysMax - created) +
                                     " pthread keys before it was fenced");
  }
  for (unsigned key : mine) del(key);
}

void KeyBands::anchor_thread(unsigned band) const {
  thread_local uint32_t anchored_blocks = 0;
  uint32_t missing = band_blocks_.at(band) & ~anchored_blocks;
  for (unsigned block = 0; missing != 0; ++block, missing >>= 1) {
    if (missing & 1u) pthread_setspecific(block * kBlock, &anchor_dummy);
  }
  anchored_blocks |= band_blocks_[band];
}

}  // namespace manypy::isolation
