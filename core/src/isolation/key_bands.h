// Disjoint pthread-key bands for link-map namespaces (hazards 3 and 9 of
// docs/isolation.md).
//
// Every namespace has its own libc, and so its own table of pthread keys
// numbered from 0, but all of them store values in the one thread descriptor
// of each thread. Left alone, namespace 1's key 0 and the host's key 0 are
// the same slot. The plan:
//
//   [0, kHostKeys)         the host's own keys (JVM, Go runtime, libtorch...)
//   [kHostKeys, 1024)      claimed by the host libc at first use and never
//                          used by it; split into one band per namespace.
//
// In each namespace's libc every key outside its band is created and never
// deleted, so that libc can only hand out keys from its band, and fails
// cleanly (EAGAIN) when the band is used up instead of colliding.
//
// Keys >= 32 keep their values in 32-key blocks that pthread_setspecific
// allocates with the calling libc's calloc on first use, while thread exit
// frees them with the host libc's free. So the first key of every block in
// the namespace region is an "anchor": in no band, owned by the host, and set
// to a dummy value by the host on every thread before that thread first
// enters a namespace, so that the host's calloc owns every block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace manypy::isolation {

class KeyBands {
 public:
  static constexpr unsigned kKeysMax = 1024;   // PTHREAD_KEYS_MAX on glibc
  static constexpr unsigned kBlock = 32;       // PTHREAD_KEY_2NDLEVEL_SIZE
  static constexpr unsigned kHostKeys = 128;   // keys left to the host
  static constexpr unsigned kMaxBands = 15;    // glibc's DL_NNS - 1
  // Bands in use, so interpreters at most: fewer than kMaxBands when one
  // interpreter's torch needs more keys than a fifteenth of the region
  // (torch 2.x's CUDA libraries); measured per build by
  // cmake/python_torch.cmake.
#ifndef MANYPY_KEY_BANDS
#define MANYPY_KEY_BANDS 15
#endif
  static constexpr unsigned kBands = MANYPY_KEY_BANDS;
  static_assert(kBands >= 1 && kBands <= kMaxBands);

  // The plan: claims the namespace region in the host libc, so it must be
  // made before any namespace is, and only once per process (the
  // InterpreterSet's, made when it first needs it).
  KeyBands();
  KeyBands(const KeyBands&) = delete;
  KeyBands& operator=(const KeyBands&) = delete;

  // Number of bands whose keys and anchors were all free when claimed.
  unsigned usable_bands() const { return static_cast<unsigned>(usable_.size()); }
  // Band number (0-based) of the `slot`-th usable band.
  unsigned band_of_slot(unsigned slot) const { return usable_.at(slot); }

  // Fences a namespace's libc into band `band` using that libc's own
  // pthread_key_create/delete. Throws manypy::Error on failure.
  using KeyCreateFn = int (*)(unsigned*, void (*)(void*));
  using KeyDeleteFn = int (*)(unsigned);
  void fence_namespace(unsigned band, KeyCreateFn create, KeyDeleteFn del) const;

  // On the calling thread, makes the host libc own the key blocks of `band`.
  // Cheap after the first call per thread and band.
  void anchor_thread(unsigned band) const;

  // Keys of a band, for tests and diagnostics.
  const std::vector<unsigned>& band_keys(unsigned band) const { return bands_.at(band); }

 private:
  std::vector<std::vector<unsigned>> bands_;  // keys of each band
  std::vector<uint32_t> band_blocks_;          // bit b: band touches block b
  std::vector<unsigned> usable_;
};

}  // namespace manypy::isolation
