#pragma once
// SHA-256 (FIPS 180-4) of bytes and of files: reproduce records each output's size and hash in the cell's manifest and
// reuses a cell only while they still match.
//
//   sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
//   sha256_file("out/theory/theory.csv")   // throws rankscope::Error("cannot read", path) when unreadable
//   fnv1a("text")                            // 64-bit FNV-1a: settings keys, corpus splits (not for integrity)
#include <cstdint>
#include <filesystem>
#include <string>

namespace rankscope {

std::string sha256_hex(const std::string& bytes);
std::string sha256_file(const std::filesystem::path& path);  // lower-case hex, 64 digits

// 64-bit FNV-1a of `bytes`, continuing from `hash` (the offset basis by default).
inline std::uint64_t fnv1a(const std::string& bytes, std::uint64_t hash = 1469598103934665603ULL) {
    for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ULL;
    return hash;
}

}  // namespace rankscope
