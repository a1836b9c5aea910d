// Data of the trained tasks (SPEC.md §4 E3, E4), generated exactly as the paper describes them.
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <numeric>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/tasks.hpp"
#include "rankscope/tokenizer.hpp"

namespace rankscope {

TaskBatch TaskBatch::slice(std::int64_t begin, std::int64_t end) const {
    TaskBatch part{inputs.slice(0, begin, end), targets.slice(0, begin, end), {}};
    if (key_bias.defined()) part.key_bias = key_bias.slice(0, begin, end);
    return part;
}

TaskBatch TaskBatch::take(const at::Tensor& indices) const {
    TaskBatch part{inputs.index_select(0, indices), targets.index_select(0, indices), {}};
    if (key_bias.defined()) part.key_bias = key_bias.index_select(0, indices);
    return part;
}

TaskBatch TaskBatch::to(const at::Device& device) const {
    auto on = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
    return {on(inputs), on(targets), on(key_bias)};
}

TaskBatch make_sort_data(int count, int length, int vocab, std::mt19937_64& rng) {
    std::uniform_int_distribution<std::int64_t> value(0, vocab - 1);
    at::Tensor inputs = torch::empty({count, length}, torch::kLong);
    auto data = inputs.accessor<std::int64_t, 2>();
    for (int i = 0; i < count; ++i)
        for (int j = 0; j < length; ++j) data[i][j] = value(rng);
    return {inputs, std::get<0>(inputs.sort(-1)), {}};
}

std::vector<bool> hull_vertices(const std::vector<double>& x, const std::vector<double>& y) {
    const std::size_t n = x.size();
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b] || (x[a] == x[b] && y[a] < y[b]); });
    auto cross = [&](std::size_t o, std::size_t a, std::size_t b) {
        return (x[a] - x[o]) * (y[b] - y[o]) - (y[a] - y[o]) * (x[b] - x[o]);
    };
    // Lower then upper chain; a point is popped unless the turn is strictly counter-clockwise.
    std::vector<std::size_t> chain;
    for (int pass = 0; pass < 2; ++pass) {
        const std::size_t base = chain.size();
        for (std::size_t step = 0; step < n; ++step) {
            const std::size_t p = pass == 0 ? order[step] : order[n - 1 - step];
            while (chain.size() >= base + 2 && cross(chain[chain.size() - 2], chain.back(), p) <= 0) chain.pop_back();
            chain.push_back(p);
        }
        chain.pop_back();  // the last point starts the other chain
    }
    std::vector<bool> vertex(n, false);
    for (std::size_t p : chain) vertex[p] = true;
    if (n == 1) vertex[0] = true;
    return vertex;
}

TaskBatch make_hull_data(int count, int points, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> coordinate(0.0, 10.0);
    std::normal_distribution<double> offset(0.0, 3.3);
    at::Tensor inputs = torch::empty({count, points, 2}, torch::kFloat);
    at::Tensor targets = torch::empty({count, points}, torch::kLong);
    auto in = inputs.accessor<float, 3>();
    auto out = targets.accessor<std::int64_t, 2>();
    std::vector<double> x(static_cast<std::size_t>(points)), y(static_cast<std::size_t>(points));
    for (int i = 0; i < count; ++i) {
        for (int j = 0; j < points; ++j) x[j] = coordinate(rng), y[j] = coordinate(rng);
        const double dx = offset(rng), dy = offset(rng);
        for (int j = 0; j < points; ++j) {
            // Labels from the float32 coordinates the model sees.
            in[i][j][0] = static_cast<float>(x[j] + dx), in[i][j][1] = static_cast<float>(y[j] + dy);
            x[j] = in[i][j][0], y[j] = in[i][j][1];
        }
        const auto vertex = hull_vertices(x, y);
        for (int j = 0; j < points; ++j) out[i][j] = vertex[j] ? 1 : 0;
    }
    return {inputs, targets, {}};
}

TaskBatch make_circle_data(int points) {
    if (points < 4 || points % 2) throw Error(fmt::format("the circle needs an even number of points ≥ 4, got {}", points));
    // Point t at angle 2πt/points; the first arc runs over the upper half, the second over the lower half.
    const double radius = 0.3;
    const int items = points / 2 - 1;
    auto point = [&](int t) {
        const double angle = 2.0 * M_PI * t / points;
        return std::pair<float, float>(static_cast<float>(radius * std::cos(angle)), static_cast<float>(radius * std::sin(angle)));
    };
    at::Tensor inputs = torch::empty({items, 2, 2}, torch::kFloat), targets = torch::empty({items, 2, 2}, torch::kFloat);
    auto in = inputs.accessor<float, 3>();
    auto out = targets.accessor<float, 3>();
    for (int i = 0; i < items; ++i)
        for (int token = 0; token < 2; ++token) {
            const int t = i + token * (items + 1);
            std::tie(in[i][token][0], in[i][token][1]) = point(t);
            std::tie(out[i][token][0], out[i][token][1]) = point(t + 1);
        }
    return {inputs, targets, {}};
}

std::vector<std::pair<std::string, std::string>> read_sentence_pairs(const std::string& tsv_path, int pairs) {
    // Bounded read of a regular file (a FIFO or /dev/zero is refused before reading, see docs/reliability.md).
    std::istringstream in(read_file_limited(tsv_path, kMaxTextFileBytes, "sentence-pair file"));
    std::string line;
    if (!std::getline(in, line)) throw Error("empty sentence-pair file", tsv_path);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto header = split_tabs(line);
    const auto first = std::find(header.begin(), header.end(), "sentence1");
    const auto second = std::find(header.begin(), header.end(), "sentence2");
    if (first == header.end() || second == header.end())
        throw Error("no sentence1/sentence2 columns in the header (a GLUE RTE-style .tsv is expected)", tsv_path);
    const auto a = static_cast<std::size_t>(first - header.begin()), b = static_cast<std::size_t>(second - header.begin());
    std::vector<std::pair<std::string, std::string>> result;
    while (static_cast<int>(result.size()) < pairs && std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const auto fields = split_tabs(line);
        if (fields.size() <= std::max(a, b) || fields[a].empty() || fields[b].empty()) continue;
        result.emplace_back(fields[a], fields[b]);
    }
    if (static_cast<int>(result.size()) < pairs)
        throw Error(fmt::format("only {} sentence pairs, {} needed", result.size(), pairs), tsv_path);
    return result;
}

TaskBatch make_memorization_data(const std::vector<std::vector<int>>& token_ids, int max_tokens, std::mt19937_64& rng) {
    if (token_ids.empty()) throw Error("no tokenised text for the memorization task");
    const auto count = static_cast<std::int64_t>(token_ids.size());
    at::Tensor inputs = torch::zeros({count, max_tokens}, torch::kLong);
    at::Tensor targets = torch::full({count, max_tokens}, -1, torch::kLong);
    at::Tensor key_bias = torch::full({count, 1, 1, max_tokens}, -1e4, torch::kFloat);
    std::bernoulli_distribution label(0.5);
    for (std::int64_t i = 0; i < count; ++i) {
        const auto& ids = token_ids[static_cast<std::size_t>(i)];
        if (ids.empty()) throw Error(fmt::format("sentence pair {} has no tokens", i));
        const auto n = std::min<std::int64_t>(max_tokens, static_cast<std::int64_t>(ids.size()));
        for (std::int64_t j = 0; j < n; ++j) {
            inputs[i][j] = ids[static_cast<std::size_t>(j)];
            targets[i][j] = label(rng) ? 1 : 0;
        }
        key_bias[i].narrow(-1, 0, n).zero_();
    }
    return {inputs, targets, key_bias};
}

}  // namespace rankscope
