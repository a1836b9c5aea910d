#pragma once
// Readers and writers for the matrix and checkpoint formats rankscope uses.
//
// Every reader validates against the published format and throws rankscope::Error naming the file and the problem
// (truncated data, unsupported dtype, bad header, missing tensor). Every writer is atomic: it writes "<path>.tmp-<pid>"
// and renames it over <path>, so a crash never leaves a half-written result.
#include <nlohmann/json_fwd.hpp>

#include "rankscope/array.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rankscope {

// ---- .npy (NumPy format versions 1.0, 2.0, 3.0) -----------------------------------------------------------------
HostArray read_npy(const std::string& path);
void write_npy(const std::string& path, const ArrayView& array);

// ---- .csv: numeric rows, comma- or whitespace-separated; a first line that is not numeric is a header ----------
HostArray read_csv_matrix(const std::string& path);

// ---- .safetensors --------------------------------------------------------------------------------------------------
// Memory-maps the file; views stay valid while the SafetensorsFile lives.
class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string& path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return path_; }
    std::vector<std::string> names() const;  // sorted
    bool contains(const std::string& name) const { return entries_.count(name) != 0; }
    // Throws Error("no tensor named ...", path) listing a few available names.
    ArrayView view(const std::string& name) const;
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

private:
    std::string path_;
    const std::byte* mapping_ = nullptr;
    std::size_t mapping_size_ = 0;
    std::map<std::string, ArrayView> entries_;
    std::map<std::string, std::string> metadata_;
};

struct NamedArray {
    std::string name;
    ArrayView array;
};
void write_safetensors(const std::string& path, const std::vector<NamedArray>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// ---- any matrix file -----------------------------------------------------------------------------------------------
// "x.npy", "x.csv", "model.safetensors:name" (or "model.safetensors" holding exactly one tensor).
HostArray read_matrix_file(const std::string& spec);

// ---- JSON files ----------------------------------------------------------------------------------------------------
// The parsed file; throws Error("cannot open <what>", path) or Error("not valid JSON: ...", path).
nlohmann::json read_json_file(const std::string& path, const std::string& what);

// ---- atomic text output --------------------------------------------------------------------------------------------
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace rankscope
