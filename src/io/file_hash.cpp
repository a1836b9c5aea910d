// SHA-256 as FIPS 180-4 defines it, streaming over a file in 64 KiB reads.
#include "rankscope/file_hash.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
    0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
    0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

class Sha256 {
public:
    void update(const unsigned char* data, std::size_t size) {
        total_ += size;
        while (size > 0) {
            const std::size_t take = std::min(size, 64 - fill_);
            std::memcpy(block_.data() + fill_, data, take);
            fill_ += take, data += take, size -= take;
            if (fill_ == 64) compress(), fill_ = 0;
        }
    }
    std::string hex() {
        const std::uint64_t bits = total_ * 8;
        const unsigned char pad = 0x80;
        update(&pad, 1);
        const unsigned char zero = 0;
        while (fill_ != 56) update(&zero, 1);
        unsigned char length[8];
        for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
        update(length, 8);
        static const char* digits = "0123456789abcdef";
        std::string out;
        for (std::uint32_t word : state_)
            for (int shift = 28; shift >= 0; shift -= 4) out += digits[(word >> shift) & 0xf];
        return out;
    }

private:
    void compress() {
        std::uint32_t w[64];
        for (int i = 0; i < 16; ++i)
            w[i] = std::uint32_t(block_[4 * i]) << 24 | std::uint32_t(block_[4 * i + 1]) << 16 |
                   std::uint32_t(block_[4 * i + 2]) << 8 | std::uint32_t(block_[4 * i + 3]);
        for (int i = 16; i < 64; ++i) {
            const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3], e = state_[4], f = state_[5],
                      g = state_[6], h = state_[7];
        for (int i = 0; i < 64; ++i) {
            const std::uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
            const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        state_[0] += a, state_[1] += b, state_[2] += c, state_[3] += d;
        state_[4] += e, state_[5] += f, state_[6] += g, state_[7] += h;
    }
    std::array<std::uint32_t, 8> state_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                           0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::array<unsigned char, 64> block_{};
    std::size_t fill_ = 0;
    std::uint64_t total_ = 0;
};

}  // namespace

std::string sha256_hex(const std::string& bytes) {
    Sha256 hash;
    hash.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    return hash.hex();
}

std::string sha256_file(const std::filesystem::path& path) {
    // A regular file only (a FIFO would block, /dev/zero never end), read up to the size fstat gave.
    const InputFile file(path.string(), "hashed file", FileUse::OwnOutput);  // (not an input of the run)
    Sha256 hash;
    std::array<char, 65536> buffer;
    for (std::uint64_t offset = 0; offset < file.size();) {
        const std::uint64_t count = std::min<std::uint64_t>(buffer.size(), file.size() - offset);
        file.read_at(offset, buffer.data(), count, "hashed file");
        hash.update(reinterpret_cast<const unsigned char*>(buffer.data()), static_cast<std::size_t>(count));
        offset += count;
    }
    return hash.hex();
}

}  // namespace rankscope
