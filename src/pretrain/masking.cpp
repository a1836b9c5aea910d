// BERT's masked-language-model masking (Devlin et al. 2019, §3.1; Hugging Face's DataCollatorForLanguageModeling):
//   selected ~ Bernoulli(rate) on every non-special token
//   selected → [MASK] (80%), a uniformly drawn token (10%), unchanged (10%); labels = original ids where selected.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "rankscope/error.hpp"
#include "rankscope/pretrain.hpp"

namespace rankscope {

MaskedTokens mask_tokens(const at::Tensor& input_ids, const at::Tensor& special, int mask_id, int random_low,
                         int random_high, double rate, std::uint64_t seed) {
    if (input_ids.dim() != 2 || input_ids.scalar_type() != at::kLong || !special.defined() ||
        special.sizes() != input_ids.sizes() || special.scalar_type() != at::kBool)
        throw Error("mask_tokens: input_ids must be int64 [B, n] and special a bool tensor of the same shape");
    if (!(rate > 0 && rate < 1) || random_low >= random_high) throw Error("mask_tokens: rate in (0, 1) and a non-empty random range expected");
    at::Generator generator = at::detail::createCPUGenerator(seed);
    const at::Tensor ids = input_ids.to(at::kCPU);
    const at::Tensor candidates = special.to(at::kCPU).logical_not();
    at::Tensor selected = at::rand(ids.sizes(), generator, at::kFloat).lt(rate).logical_and_(candidates);
    if (!selected.any().item<bool>()) {  // every batch gets a loss: the first non-special token
        const at::Tensor first = candidates.flatten().nonzero();
        if (first.size(0) == 0) throw Error("mask_tokens: the batch has no token that is not special");
        selected.view({-1})[first[0][0].item<std::int64_t>()] = true;
    }
    const at::Tensor choice = at::rand(ids.sizes(), generator, at::kFloat);
    const at::Tensor to_mask = selected.logical_and(choice.lt(0.8));
    const at::Tensor to_random = selected.logical_and(choice.ge(0.8)).logical_and_(choice.lt(0.9));
    const at::Tensor random_ids = at::randint(random_low, random_high, ids.sizes(), generator, at::kLong);
    MaskedTokens out;
    out.input_ids = at::where(to_mask, at::full_like(ids, mask_id), at::where(to_random, random_ids, ids));
    out.labels = at::where(selected, ids, at::full_like(ids, -100));
    return out;
}

}  // namespace rankscope
