// Attention-sink measures per layer and head (docs/attention_sinks.md), from the unmodified model's attention maps.
#include <torch/torch.h>

#include "rankscope/e1.hpp"

namespace rankscope {

at::Tensor head_attention_summaries(const at::Tensor& pattern, const at::Tensor& attention_mask) {
    // pattern P [B, H, n, n] (rows: queries, columns: keys); real [B, n] 0/1. In float64 on the pattern's device.
    const at::Tensor p = pattern.to(torch::kDouble);
    const at::Tensor real = attention_mask.to(pattern.device(), torch::kDouble);
    const at::Tensor first = attention_mask.to(pattern.device(), torch::kLong).argmax(1);  // [B]: the first real token (argmax: first 1)
    const auto B = p.size(0), H = p.size(1), n = p.size(2);
    // Column f_b of every row: attention each query pays to its sample's first real token, [B, H, n].
    const at::Tensor to_first = p.gather(3, first.view({B, 1, 1, 1}).expand({B, H, n, 1})).squeeze(3);
    // Entropy of each row, −Σ_j P_ij log P_ij (xlogy: 0 log 0 = 0), [B, H, n].
    const at::Tensor entropy = -torch::xlogy(p, p).sum(3);
    // Means over each sample's real queries, then over samples: [H].
    const at::Tensor queries = real.unsqueeze(1);                   // [B, 1, n]
    const at::Tensor count = real.sum(1).view({B, 1});              // [B, 1]
    auto mean_over_real = [&](const at::Tensor& x) { return ((x * queries).sum(2) / count).mean(0); };
    return torch::stack({mean_over_real(to_first), mean_over_real(entropy)});
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

double sink_rate(const std::vector<double>& first_token_share, double threshold) {
    if (first_token_share.empty()) return 0.0;
    std::size_t sinks = 0;
    for (double share : first_token_share) sinks += share > threshold ? 1 : 0;
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
                 {"threshold", Table::Real}});
    const std::string mask = result.settings.bidirectional ? "bidirectional" : "causal";
    for (const auto& run : result.runs)
        for (std::size_t l = 0; l < run.heads.size(); ++l) {
            const auto& stats = run.heads[l];
            double share = 0, entropy = 0;
            for (std::size_t h = 0; h < stats.first_token_share.size(); ++h) {
                share += stats.first_token_share[h] / double(stats.first_token_share.size());
                entropy += stats.entropy[h] / double(stats.entropy.size());
            }
            table.add({result.model, run.weights, mask, static_cast<std::int64_t>(l),
                       sink_rate(stats.first_token_share, result.settings.sink_threshold), share, entropy,
                       result.settings.sink_threshold});
        }
    return table;
}

}  // namespace rankscope
