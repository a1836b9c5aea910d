#pragma once
// Reading a Hugging Face checkpoint's tensors into parameters: shared by the whole-model loader (hf_model.cpp) and the
// streamed one (hf_streamed.cpp), so both check and convert alike. Errors are one line naming the shard and tensor.
#include <ATen/ATen.h>

#include <set>
#include <string>
#include <vector>

#include "loaders/hf_checkpoint.hpp"
#include "rankscope/models.hpp"  // HfConfig

namespace rankscope::models {
struct DecoderLayout;
}

namespace rankscope::detail {

// A decoder architecture's layout (how a streamed model reads one layer; hf_model.cpp's table of architectures);
// nullptr for an encoder. Throws Error naming config.json for an unknown model_type.
const models::DecoderLayout* decoder_layout_of(const HfConfig& config);
// Where the architecture stores its layers: layer l's tensors are "<list><l>.<name>" ("h.", "layers.", "encoder.layer.");
// nullptr for ALBERT, whose one shared layer is stored once. Throws Error as decoder_layout_of does.
const char* layer_list_of(const HfConfig& config);

// "bert.", "albert.", "transformer.", "model." or "": the prefix the checkpoint puts before the base model's names
// (task-head checkpoints), found by where `first_parameter` (the model's first parameter name) sits.
std::string checkpoint_prefix(const HfCheckpoint& weights, const std::string& first_parameter);
// The stored tensor has `shape` and a floating dtype (headers only; no value is read).
void check_stored_tensor(const HfCheckpoint& weights, const std::string& stored, const std::vector<std::int64_t>& shape);
// The stored tensor as a tensor over the memory-mapped bytes, in its stored dtype (valid while `weights` lives).
at::Tensor stored_tensor(const HfCheckpoint& weights, const std::string& stored);
// check_stored_tensor, conversion to the parameter's dtype, finiteness, copy; then the tensor's pages are released.
void load_parameter(const HfCheckpoint& weights, const std::string& stored, at::Tensor& parameter);
// A parameter no measurement reads and the checkpoint does not supply (a BERT or ALBERT pooler the checkpoint lacks,
// the streamed model's one-row token embedding): zeroed, never left as the unset memory models::Draw::No allocates.
void zero_unread_parameter(at::Tensor& parameter);
// "N tensors missing: a, b, c, ..." naming `source`, when `missing` is not empty.
void throw_missing(const std::vector<std::string>& missing, const std::string& source);
// A config with more layers than the checkpoint holds under `layer_prefix` ("model.layers."): one error naming both
// counts and the config's key (it named a few tensors of the config's last layer as missing). Nothing when the checkpoint
// has no tensor under the prefix at all: the missing tensors' names say more then.
void check_layer_count(const HfConfig& config, const HfCheckpoint& weights, const std::string& layer_prefix);
// A task head's tensor (cls., lm_head., classifier., ...): beside the base model in a checkpoint, never read.
bool is_task_head_tensor(const std::string& name);
// One warning line on stderr naming the base model's tensors (under `prefix`, not a task head, not a saved buffer such
// as position_ids) that the model did not read (`read`: the stored names it did): a 6-layer checkpoint under a config
// of 4 layers ran silently as its first 4 before.
void warn_unread_tensors(const HfCheckpoint& weights, const std::string& prefix, const std::set<std::string>& read,
                         const HfConfig& config);
std::string shape_list(const std::vector<std::int64_t>& shape);

}  // namespace rankscope::detail
