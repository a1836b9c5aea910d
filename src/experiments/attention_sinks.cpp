// Attention-sink measures per layer and head (docs/decoders.md, "Attention sinks"), from the unmodified model's attention maps.
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "rankscope/e1.hpp"

namespace rankscope {

namespace {

// One sample's statistics: its real queries' mean attention to its first real token and mean row entropy, [2, H]
// float64. pattern [H, n, n], real [n] 0/1 (both on one device).
at::Tensor sample_head_summaries(const at::Tensor& pattern, const at::Tensor& real) {
    const at::Tensor p = pattern.to(torch::kDouble);
    const at::Tensor queries = real.to(torch::kDouble);  // [n]
    const auto H = p.size(0), n = p.size(1);
    const at::Tensor first = real.to(torch::kLong).argmax().view({1, 1, 1});  // the first real token (argmax: first 1)
    // Column f of every row: the attention each query pays to the first real token, [H, n].
    const at::Tensor to_first = p.gather(2, first.expand({H, n, 1})).squeeze(2);
    // Entropy of each row, −Σ_j P_ij log P_ij (0 log 0 = 0 through the clamp), [H, n]; in place on one temporary.
    const at::Tensor entropy = -p.clamp_min(1e-300).log_().mul_(p).sum(2);
    const at::Tensor count = queries.sum();
    return torch::stack({(to_first * queries).sum(1) / count, (entropy * queries).sum(1) / count});
}

}  // namespace

at::Tensor head_attention_summaries(const at::Tensor& pattern, const at::Tensor& attention_mask) {
    // pattern P [B, H, n, n] (rows: queries, columns: keys); attention_mask [B, n] 0/1. Sample by sample, so that the
    // float64 copies are one sample's (a BERT-base map at 128 × 512 would be 3.2 GB at once), on the pattern's device;
    // then the mean over samples, [2, H].
    const at::Tensor mask = attention_mask.to(pattern.device());
    std::vector<at::Tensor> samples;
    for (std::int64_t b = 0; b < pattern.size(0); ++b) samples.push_back(sample_head_summaries(pattern[b], mask[b]));
    const at::Tensor stacked = torch::stack(samples);  // [B, 2, H]
    // Each statistic's mean over samples from a contiguous [B, H], as it was computed before the split by sample (the
    // same summation order: the same numbers to the last bit).
    return torch::stack({stacked.select(1, 0).contiguous().mean(0), stacked.select(1, 1).contiguous().mean(0)});
}

HeadAttentionStats head_attention_stats(const at::Tensor& summaries) {
    const at::Tensor values = summaries.to(at::kCPU, torch::kDouble).contiguous();  // [2, H]
    const double* data = values.data_ptr<double>();
    const auto H = values.size(1);
    HeadAttentionStats stats;
    stats.first_token_share.assign(data, data + H);
    stats.entropy.assign(data + H, data + 2 * H);
    return stats;
}

HeadAttentionStats head_attention_stats(const at::Tensor& pattern, const at::Tensor& attention_mask) {
    return head_attention_stats(head_attention_summaries(pattern, attention_mask));
}

UniformHead uniform_head(std::int64_t tokens, bool causal, int window) {
    const double n = double(tokens);
    if (!causal) return {1.0 / n, std::log(n)};
    UniformHead head;
    for (std::int64_t i = 1; i <= tokens; ++i) {
        const std::int64_t seen = window > 0 ? std::min<std::int64_t>(i, window) : i;  // m_i
        if (seen == i) head.first_token_share += 1.0 / double(i) / n;  // key 1 is among the last m_i
        head.entropy += std::log(double(seen)) / n;
    }
    return head;
}

std::string sliding_window_words(const std::vector<int>& windows, std::int64_t tokens) {
    int narrower = 0, window = 0;
    for (int w : windows)
        if (w > 0 && w < tokens) ++narrower, window = w;
    if (narrower == 0) return "";
    return fmt::format(", with its sliding window of {} keys on {} of {} layers", window, narrower, windows.size());
}

UniformHead uniform_head_mean(const std::vector<std::int64_t>& real_tokens, bool causal, const std::vector<int>& windows) {
    const std::vector<int> layers = windows.empty() ? std::vector<int>{0} : windows;
    const double count = double(real_tokens.size() * layers.size());
    UniformHead mean;
    for (std::int64_t tokens : real_tokens)
        for (int window : layers) {
            const UniformHead head = uniform_head(tokens, causal, window);
            mean.first_token_share += head.first_token_share / count;
            mean.entropy += head.entropy / count;
        }
    return mean;
}

std::vector<std::int64_t> real_tokens_of(const RealModelResult& result) {
    return result.real_tokens.empty() ? std::vector<std::int64_t>(std::size_t(std::max<std::int64_t>(result.samples, 1)), result.tokens)
                                      : result.real_tokens;
}

double sink_rate(const std::vector<double>& first_token_share, double threshold) {
    if (first_token_share.empty()) return 0.0;
    std::size_t sinks = 0;
    for (double share : first_token_share) {
        if (std::isnan(share)) return NAN;  // a NaN map (--allow-nonfinite) is neither a sink nor not one
        sinks += share > threshold ? 1 : 0;
    }
    return double(sinks) / double(first_token_share.size());
}

Table attention_heads_table(const RealModelResult& result) {
    Table table({{"model", Table::Text}, {"weights", Table::Text}, {"mask", Table::Text}, {"layer", Table::Integer},
                 {"head", Table::Integer}, {"first_token_share", Table::Real}, {"entropy", Table::Real},
                 {"sink", Table::Integer}});
    const std::string mask = result.settings.bidirectional ? "bidirectional" : "causal";
    for (const auto& run : result.runs)
        for (std::size_t l = 0; l < run.heads.size(); ++l)
            for (std::size_t h = 0; h < run.heads[l].first_token_share.size(); ++h) {
                const double share = run.heads[l].first_token_share[h];
                table.add({result.model, run.weights, mask, static_cast<std::int64_t>(l), static_cast<std::int64_t>(h), share,
                           run.heads[l].entropy[h], std::int64_t(share > result.settings.sink_threshold ? 1 : 0)});
            }
    return table;
}

Table sink_rate_table(const RealModelResult& result) {
    Table table({{"model", Table::Text}, {"weights", Table::Text}, {"mask", Table::Text}, {"layer", Table::Integer},
                 {"sink_rate", Table::Real}, {"first_token_share", Table::Real}, {"entropy", Table::Real},
                 {"threshold", Table::Real}, {"uniform_first_token_share", Table::Real}, {"uniform_entropy", Table::Real}});
    const std::string mask = result.settings.bidirectional ? "bidirectional" : "causal";
    for (const auto& run : result.runs)
        for (std::size_t l = 0; l < run.heads.size(); ++l) {
            const auto& stats = run.heads[l];
            const int window = l < result.attention_windows.size() ? result.attention_windows[l] : 0;
            const UniformHead uniform = uniform_head_mean(real_tokens_of(result), !result.settings.bidirectional, {window});
            double share = 0, entropy = 0;
            for (std::size_t h = 0; h < stats.first_token_share.size(); ++h) {
                share += stats.first_token_share[h] / double(stats.first_token_share.size());
                entropy += stats.entropy[h] / double(stats.entropy.size());
            }
            table.add({result.model, run.weights, mask, static_cast<std::int64_t>(l),
                       sink_rate(stats.first_token_share, result.settings.sink_threshold), share, entropy,
                       result.settings.sink_threshold, uniform.first_token_share, uniform.entropy});
        }
    return table;
}

}  // namespace rankscope
