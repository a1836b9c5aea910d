// BERT-base forward at random init (12 layers, d = 768), 32 samples × 128 tokens, every hidden state and attention
// pattern recorded: the unit of work of one E1 variant. Args: threads, linear fast path (1 = oneDNN, 0 = the
// at::linear reference). bench/compare_torch.py runs it beside python3-torch's TransformerEncoderLayer stack.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include "rankscope/models.hpp"

namespace {

void BertBaseForward(benchmark::State& state) {
    at::set_num_threads(static_cast<int>(state.range(0)));
    const bool default_path = rankscope::linear_fast_path_enabled();
    rankscope::set_linear_fast_path(state.range(1) == 1);
    static const auto model = rankscope::make_hf_model(rankscope::builtin_hf_config("bert-base-cased"), 0);
    at::manual_seed(0);
    const rankscope::ModelBatch batch{at::randint(5, 28000, {32, 128}, at::kLong), at::ones({32, 128}, at::kLong),
                                      at::zeros({32, 128}, at::kLong)};
    for (auto _ : state) {
        rankscope::Recorder recorder;
        benchmark::DoNotOptimize(model->forward(batch, rankscope::Surgery{}, &recorder));
    }
    rankscope::set_linear_fast_path(default_path);
}

}  // namespace

BENCHMARK(BertBaseForward)
    ->Args({2, 1})
    ->Args({2, 0})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
