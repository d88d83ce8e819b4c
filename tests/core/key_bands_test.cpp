// The pthread-key plan: bands are disjoint, avoid the host's keys and the
// block anchors, and every usable band was really claimed from the host libc.
#include "isolation/key_bands.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <set>

using manypy::isolation::KeyBands;

namespace {

// The process's one plan (as the InterpreterSet's would be in a program
// that leases interpreters).
KeyBands& the_bands() {
  static KeyBands* bands = new KeyBands();
  return *bands;
}

}  // namespace

TEST(KeyBands, BandsAreDisjointAndOutsideTheHostRange) {
  KeyBands& bands = the_bands();
  ASSERT_EQ(bands.usable_bands(), KeyBands::kBands);
  std::set<unsigned> seen;
  for (unsigned b = 0; b < KeyBands::kBands; ++b) {
    const auto& keys = bands.band_keys(b);
    EXPECT_GE(keys.size(), 48u) << "band " << b << " too small for a torch namespace";
    for (unsigned key : keys) {
      EXPECT_GE(key, KeyBands::kHostKeys);
      EXPECT_LT(key, KeyBands::kKeysMax);
      EXPECT_NE(key % KeyBands::kBlock, 0u) << "key " << key << " is a block anchor";
      EXPECT_TRUE(seen.insert(key).second) << "key " << key << " is in two bands";
    }
  }
}

TEST(KeyBands, HostKeysStayBelowTheRegion) {
  the_bands();  // claims the region
  pthread_key_t key;
  ASSERT_EQ(pthread_key_create(&key, nullptr), 0);
  EXPECT_LT(key, KeyBands::kHostKeys);
  pthread_key_delete(key);
}

TEST(KeyBands, AnchoringSetsOnlyAnchorKeys) {
  KeyBands& bands = the_bands();
  bands.anchor_thread(0);
  unsigned first = bands.band_keys(0).front();
  unsigned anchor = first - first % KeyBands::kBlock;
  EXPECT_NE(pthread_getspecific(anchor), nullptr);
  for (unsigned key : bands.band_keys(0)) EXPECT_EQ(pthread_getspecific(key), nullptr);
}
