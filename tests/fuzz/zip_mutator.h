// A structure-aware libFuzzer mutator for zip archives, for the archive
// targets. libtorch's zip reader (miniz, inside Debian's uninstrumented
// libtorch_cpu) gives the fuzzer no coverage, and byte mutations almost
// always break a zip's offsets or CRCs, so few inputs would get past the zip
// layer to what reads the records (the pickles, TorchScript's parser). Half
// of the mutations here parse the input as a zip, change one record (its
// bytes, its name; drop, copy or swap records) and write a well-formed zip
// again, as torch writes them (stored, CRCs right, data aligned to 64
// bytes). The other half are libFuzzer's own byte mutations of the whole
// input, or a truncation, which keep the zip layer itself under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace fuzz {

struct ZipEntry {
  std::string name;
  std::string data;  // as stored (compressed if method != 0)
  uint16_t method = 0;
  uint32_t crc = 0;
  uint32_t uncompressed = 0;
};

inline uint32_t crc32(const std::string& s) {
  static uint32_t table[256] = {};
  if (table[1] == 0) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  }
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

inline uint32_t rd16(const uint8_t* p) { return p[0] | (p[1] << 8); }
inline uint32_t rd32(const uint8_t* p) { return rd16(p) | (rd16(p + 2) << 16); }

// The entries of a zip without zip64 records, in central directory order;
// false if the input is not one.
inline bool parse_zip(const uint8_t* d, size_t n, std::vector<ZipEntry>* out) {
  if (n < 22) return false;
  size_t eocd = n - 22;
  const size_t stop = n > 22 + 65535 ? n - 22 - 65535 : 0;
  while (rd32(d + eocd) != 0x06054b50u) {
    if (eocd == stop) return false;
    --eocd;
  }
  uint32_t count = rd16(d + eocd + 10);
  size_t cd = rd32(d + eocd + 16);
  for (uint32_t k = 0; k < count; ++k) {
    if (cd + 46 > eocd || rd32(d + cd) != 0x02014b50u) return false;
    ZipEntry e;
    e.method = static_cast<uint16_t>(rd16(d + cd + 10));
    e.crc = rd32(d + cd + 16);
    size_t csize = rd32(d + cd + 20);
    e.uncompressed = rd32(d + cd + 24);
    size_t name_len = rd16(d + cd + 28), extra_len = rd16(d + cd + 30),
           comment_len = rd16(d + cd + 32);
    size_t local = rd32(d + cd + 42);
    if (cd + 46 + name_len > eocd) return false;
    e.name.assign(reinterpret_cast<const char*>(d + cd + 46), name_len);
    if (local + 30 > n || rd32(d + local) != 0x04034b50u) return false;
    size_t start = local + 30 + rd16(d + local + 26) + rd16(d + local + 28);
    if (start > n || csize > n - start) return false;
    e.data.assign(reinterpret_cast<const char*>(d + start), csize);
    out->push_back(std::move(e));
    cd += 46 + name_len + extra_len + comment_len;
  }
  return true;
}

inline void put16(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v & 0xFF));
  s.push_back(static_cast<char>((v >> 8) & 0xFF));
}
inline void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}

// A zip as PyTorchStreamWriter writes one: each record's data aligned to 64
// bytes by an extra field, a central directory, no zip64.
inline std::string write_zip(const std::vector<ZipEntry>& entries) {
  std::string out, cd;
  for (const ZipEntry& e : entries) {
    const uint32_t offset = static_cast<uint32_t>(out.size());
    size_t end = out.size() + 30 + e.name.size();
    size_t pad = (64 - end % 64) % 64;
    if (pad != 0 && pad < 4) pad += 64;
    put32(out, 0x04034b50u);
    put16(out, 20);
    put16(out, 0);
    put16(out, e.method);
    put16(out, 0);
    put16(out, 0x21);  // 1980-01-01
    put32(out, e.crc);
    put32(out, static_cast<uint32_t>(e.data.size()));
    put32(out, e.uncompressed);
    put16(out, static_cast<uint32_t>(e.name.size()));
    put16(out, static_cast<uint32_t>(pad));
    out += e.name;
    if (pad != 0) {
      put16(out, 0x4246);  // "FB", torch's padding field
      put16(out, static_cast<uint32_t>(pad - 4));
      out.append(pad - 4, 'Z');
    }
    out += e.data;

    put32(cd, 0x02014b50u);
    put16(cd, 20);
    put16(cd, 20);
    put16(cd, 0);
    put16(cd, e.method);
    put16(cd, 0);
    put16(cd, 0x21);
    put32(cd, e.crc);
    put32(cd, static_cast<uint32_t>(e.data.size()));
    put32(cd, e.uncompressed);
    put16(cd, static_cast<uint32_t>(e.name.size()));
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, 0);
    put32(cd, offset);
    cd += e.name;
  }
  const uint32_t cd_offset = static_cast<uint32_t>(out.size());
  out += cd;
  put32(out, 0x06054b50u);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint32_t>(entries.size()));
  put16(out, static_cast<uint32_t>(entries.size()));
  put32(out, static_cast<uint32_t>(cd.size()));
  put32(out, cd_offset);
  put16(out, 0);
  return out;
}

// libFuzzer's byte mutations of `s`, growing it by at most `grow` bytes.
inline void mutate_bytes(std::string& s, size_t grow) {
  const size_t size = s.size();
  s.resize(size + grow);
  s.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(&s[0]), size, size + grow));
}

inline size_t zip_mutate(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  std::minstd_rand rng(seed);
  std::vector<ZipEntry> entries;
  if (rng() % 2 == 0 && parse_zip(data, size, &entries) && !entries.empty()) {
    ZipEntry& e = entries[rng() % entries.size()];
    switch (rng() % 8) {
      case 0: {  // drop a record
        entries.erase(entries.begin() + (&e - entries.data()));
        break;
      }
      case 1: {  // copy a record, under its own name or a mutated one
        ZipEntry copy = e;
        if (rng() % 2) mutate_bytes(copy.name, 16);
        entries.push_back(std::move(copy));
        break;
      }
      case 2: {  // swap two records' contents
        ZipEntry& other = entries[rng() % entries.size()];
        std::swap(e.data, other.data);
        std::swap(e.method, other.method);
        std::swap(e.crc, other.crc);
        std::swap(e.uncompressed, other.uncompressed);
        break;
      }
      case 3:  // rename
        mutate_bytes(e.name, 16);
        break;
      default: {  // change a record's bytes (it is stored from now on)
        mutate_bytes(e.data, e.data.size() / 4 + 64);
        e.method = 0;
        e.crc = crc32(e.data);
        e.uncompressed = static_cast<uint32_t>(e.data.size());
        break;
      }
    }
    std::string zip = write_zip(entries);
    if (zip.size() <= max_size) {
      std::memcpy(data, zip.data(), zip.size());
      return zip.size();
    }
  }
  if (size > 0 && rng() % 8 == 0) return rng() % size;  // truncated
  return LLVMFuzzerMutate(data, size, max_size);
}

}  // namespace fuzz

#define MANYPY_FUZZ_ZIP_MUTATOR                                                          \
  extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, \
                                            unsigned int seed) {                         \
    return fuzz::zip_mutate(data, size, max_size, seed);                                 \
  }
