#include <fstream>
#include <nlohmann/json.hpp>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
    std::ifstream in(path);
    if (!in) throw Error("cannot open " + what, path);
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("not valid JSON: ") + e.what(), path);
    }
}

}  // namespace rankscope
