#pragma once
// The collapse-depth tables and figure of a theory sweep (written beside sweep.csv).
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/provenance.hpp"
#include "rankscope/sweep.hpp"

namespace rankscope::cli {

// For experiment "theory": collapse_depth.csv (per run), collapse_depth_summary.csv (per variant × heads × d_model) and
// collapse_depth.{svg,png,pdf} from out/tables/theory.csv. Returns the files written (none for other experiments).
std::vector<std::string> write_collapse_depth(const SweepGrid& grid, const std::vector<const SweepCell*>& done_cells,
                                              const std::filesystem::path& out, const Provenance& provenance);

}  // namespace rankscope::cli
