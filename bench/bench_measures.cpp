// Throughput of the batched measures on 384 matrices of 128 × 128 float32 (one BERT-base attention layer for 32
// samples: 32 × 12 heads). bench/compare_torch.py runs this beside the same computation in python3-torch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include "rankscope/allocator.hpp"
#include "rankscope/measures.hpp"
#include "rankscope/vector_math.hpp"

namespace {

at::Tensor batch() {
    static const at::Tensor x = [] {
        at::manual_seed(0);
        return at::randn({384, 128, 128}, at::kFloat);
    }();
    return x;
}

void CompositeRelativeResidualMean(benchmark::State& state) {
    at::set_num_threads(static_cast<int>(state.range(0)));
    const at::Tensor x = batch();
    for (auto _ : state) benchmark::DoNotOptimize(rankscope::batched_relative_residual(x, rankscope::Norm::Composite,
                                                                                       rankscope::Center::Mean));
    state.SetItemsProcessed(state.iterations() * x.size(0));
}

void CompositeRelativeResidualRank1(benchmark::State& state) {
    at::set_num_threads(static_cast<int>(state.range(0)));
    const at::Tensor x = batch();
    for (auto _ : state) benchmark::DoNotOptimize(rankscope::batched_relative_residual(x, rankscope::Norm::Composite,
                                                                                       rankscope::Center::Rank1));
    state.SetItemsProcessed(state.iterations() * x.size(0));
}

}  // namespace

BENCHMARK(CompositeRelativeResidualMean)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CompositeRelativeResidualRank1)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
    rankscope::configure_allocator();
    rankscope::warm_up_vector_math();
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
