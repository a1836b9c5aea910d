#pragma once
// SHA-256 (FIPS 180-4) of bytes and of files: reproduce records each output's size and hash in the cell's manifest and
// reuses a cell only while they still match.
//
//   sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
//   sha256_file("out/theory/theory.csv")   // throws rankscope::Error("cannot read", path) when unreadable
#include <filesystem>
#include <string>

namespace rankscope {

std::string sha256_hex(const std::string& bytes);
std::string sha256_file(const std::filesystem::path& path);  // lower-case hex, 64 digits

}  // namespace rankscope
