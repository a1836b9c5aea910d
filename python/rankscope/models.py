"""Real architectures (SPEC.md §4, E1/E2): the encoders BERT, RoBERTa, DistilBERT, ALBERT and XLNet and the decoders
GPT-2, GPT-NeoX (Pythia), Llama, Mistral and Qwen2 from a Hugging Face folder (config.json + model.safetensors or a
sharded index, and the tokenizer files), Universal Sentence Encoder lite ("use-lite"), or a built-in configuration
(bert-base-cased, albert-base-v2, xlnet-base-cased, gpt2, pythia-160m, llama-12l, llama-gqa: random init only).

>>> run = run_model("models/all-MiniLM-L6-v2", samples=8, tokens=32)   # a folder, from the working directory
(tests/fixtures/bert-tiny is a test fixture: its 64-word vocabulary makes every word of real text [UNK], so every
sample is the same and the E1 std is 0.)
>>> run.residual          # residual.csv: model, weights, variant, layer, norm, center, mean, std, min, max, n
>>> run.findings.checks   # the E1/E2 claims with computed verdicts
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _find, _rankscope
from ._arrays import (attention_mask_ids, check_count, check_range, error, flag, from_engine, map_arrays, names,
                      to_engine)
from ._progress import shown as progress_shown
from ._tables import as_table
from ._warnings import naming, warn
from .findings import Findings

ModelSource = _rankscope.ModelSource
VARIANTS = ("SAN", "SAN+MLP", "SAN+skip", "transformer")

ModelArgument = Union[str, "os.PathLike[str]", ModelSource]


def model_source(model: ModelArgument) -> ModelSource:
    """What `model` names: a Hugging Face folder, "use-lite" (or its dist folder), or a built-in configuration."""
    return model if isinstance(model, ModelSource) else ModelSource(os.fspath(model))


def _compat(compat: str) -> bool:
    if compat not in ("none", "official"):
        raise error(f"unknown compat '{compat}' (expected none or official)", "compat")
    return compat == "official"


class Model:
    """An encoder or decoder with pretrained (`weights="pretrained"`) or random (`"init"`, from `seed`) weights whose
    parameter names are the checkpoint's. `stream` (pretrained decoders): "on" reads each layer from the checkpoint
    when the forward reaches it and frees it after (peak memory about one layer; parameters() is then unavailable),
    "off" loads the whole model, "auto" streams when the weights in float32 would take more than 3/4 of the
    available memory. `device` (cpu, cuda, cuda:N): the weights are moved there once and each forward runs there, as
    --device does; the arrays in and out stay on the CPU, and parameters() (views in CPU memory) needs the CPU."""

    def __init__(self, model: ModelArgument, weights: str = "pretrained", seed: int = 0, stream: str = "auto",
                 device: str = "cpu"):
        check_count(seed, 0, 2**64 - 1, "seed")
        if weights == "pretrained" and seed != 0:  # (it was taken and ignored)
            warn(f"seed {seed} is not used: pretrained weights are read, not drawn (seed draws weights='init')")
        self._engine = _rankscope.Model(model_source(model), weights, seed, stream, device)

    @property
    def device(self) -> str:
        """Where the weights live and the forward runs: cpu, cuda:N (its arrays in and out stay on the CPU)."""
        return self._engine.device

    @property
    def streamed(self) -> bool:
        """True when the layers are read from the checkpoint during each forward."""
        return self._engine.streamed

    @property
    def source(self) -> ModelSource:
        return self._engine.source

    @property
    def weights(self) -> str:
        return self._engine.weights

    @property
    def config(self) -> Dict[str, Any]:
        return self._engine.config

    def forward(self, input_ids: Any, attention_mask: Any = None, token_type_ids: Any = None,
                variant: str = "transformer", layer_norm: str = "keep", compat: str = "none",
                mask: Optional[str] = None, record: bool = True) -> Tuple[Any, Dict[str, Any]]:
        """(last hidden state [B, n, d], {hook: activation}) under the paper's surgery: variant SAN (no attention skip,
        no MLP), SAN+MLP, SAN+skip or transformer; layer_norm keep, remove or freeze (the paper's affine model);
        mask (decoders) causal (their own, the default) or bidirectional (the same weights, every real token attending
        to every real token). Hooks: hook_embed, blocks.{l}.hook_resid_pre, hook_attn_out, hook_resid_post,
        attn.hook_pattern; decoders also ln_final.hook_normalized."""
        ids, torch_out = to_engine(input_ids, "input_ids")
        real = attention_mask_ids(attention_mask)
        types = None if token_type_ids is None else to_engine(token_type_ids, "token_type_ids")[0]
        with progress_shown():  # a streamed model's layers
            last, hooks = self._engine.forward(ids, real, types, variant, layer_norm, _compat(compat), mask or "", record)
        return from_engine(last, torch_out), map_arrays(hooks, torch_out)

    __call__ = forward

    def parameters(self) -> Dict[str, Any]:
        """{checkpoint name: array} viewing the weights (no copy; writing into them changes the model, and from then
        on each forward refuses NaN or Inf weights by name)."""
        return self._engine.parameters()


def load_model(model: ModelArgument, weights: str = "pretrained", seed: int = 0, stream: str = "auto",
               device: str = "cpu") -> Model:
    """The model `model` names with pretrained weights, or random ones (weights="init", drawn from `seed` as the
    library's from_config init: normal(0, initializer_range), zero biases, unit norms). `stream`: see Model."""
    return Model(model, weights, seed, stream, device)


TextArgument = Union[None, str, "os.PathLike[str]", Sequence[str]]


def _text_path(text: TextArgument, scratch: str) -> str:
    """The text file to read: `text` itself, the sentences of a list written one per line into `scratch`, or the
    repository's GLUE RTE train."""
    if isinstance(text, (list, tuple)):
        if not text:
            raise error("no sentences given", "text")
        for number, sentence in enumerate(text, 1):
            if not isinstance(sentence, str):
                raise error(f"sentence {number} is {type(sentence).__name__}, not text", "text")
            if not sentence.strip():
                raise error(f"sentence {number} is empty", "text")
            if "\n" in sentence or "\r" in sentence:
                raise error(f"sentence {number} has a line break (give each sentence as its own entry)", "text")
        path = os.path.join(scratch, "sentences.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(text) + "\n")
        return path
    if text is not None:
        if not os.fspath(text):  # "cannot open text file" with no name
            raise error("an empty path: give a text file or a list of sentences", "text")
        return os.fspath(text)
    found = _find.default_text()
    if found is None:
        raise error("no text given and the repository's data/RTE/train.tsv is not found; pass text=FILE")
    return found


def text_batch(model: ModelArgument, text: TextArgument = None, samples: int = 32, tokens: int = 128,
               tokenizer_dir: Optional[str] = None) -> Dict[str, Any]:
    """The sentences of `text` (a file: a GLUE .tsv's sentence1/sentence2, else one per line; or a list of sentences;
    default GLUE RTE train) packed into `samples` × `tokens` real tokens with the model's tokenizer, special tokens
    included: input_ids, attention_mask, token_type_ids (int64 numpy; GPT-2's batch has none: given ones add their
    token embeddings to its input, as transformers' GPT2Model does). A built-in configuration trains a 4000-piece
    SentencePiece model on the text into `tokenizer_dir` (default: a temporary folder), as the command line does."""
    source = model_source(model)
    check_count(samples, 1, 4096, "samples")
    check_count(tokens, 4, 4096, "tokens")
    with tempfile.TemporaryDirectory(prefix="rankscope-tokenizer-") as scratch:
        path = _text_path(text, scratch)
        listed = isinstance(text, (list, tuple))
        try:
            with naming(path, "the sentences given") if listed else contextlib.nullcontext():
                return _rankscope.text_batch(source, path, samples, tokens, tokenizer_dir or scratch)
        except _rankscope.Error as failure:
            # Sentences given as a list are written to a scratch file: the error names them, not that file.
            if listed and getattr(failure, "where", "") == path:
                message = str(failure)
                raise error(message[:-len(f" ({path})")] if message.endswith(f" ({path})") else message, "text") from None
            raise


_BATCH_KEYS = ("input_ids", "attention_mask", "token_type_ids")


def _given_batch(inputs: Any) -> Dict[str, Any]:
    """A batch given in memory: a mapping (a dict, a tokenizer's BatchEncoding) with input_ids and optional
    attention_mask, token_type_ids, or the input ids alone (an array, tensor or nested list). A key other than these
    is an error: a misspelt attention_mask was ignored and the padding measured as tokens."""
    if isinstance(inputs, Mapping):
        unknown = [repr(key) for key in inputs if key not in _BATCH_KEYS]
        if unknown:
            raise error(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} (expected "
                        f"{', '.join(_BATCH_KEYS)})", "inputs")
        if inputs.get("input_ids") is None:
            raise error("no input_ids", "inputs")
        given = dict(inputs)
    else:
        given = {"input_ids": inputs}
    batch = {name: None if given.get(name) is None else to_engine(given[name], name)[0]
             for name in ("input_ids", "token_type_ids")}
    batch["attention_mask"] = attention_mask_ids(given.get("attention_mask"))
    return batch


@dataclass
class ModelRun:
    """One `rankscope model` run: the tables it writes, its findings, and the batch it ran on."""
    model: str
    model_type: str
    weights: Sequence[str]
    residual: Any        # residual.csv (E1): relative residual per variant and layer, mean/std/min/max over samples
    paths: Any           # paths.csv (E2): rank-1 relative residual of attention products along random paths
    skip_ratio: Any      # skip_ratio.csv: α_l per layer of the unmodified model
    iterate: Any         # iterate.csv (USE lite; empty otherwise)
    findings: Findings   # E1/E2/α claims with computed verdicts
    batch: Dict[str, Any]
    activations: Dict[str, Any] = field(default_factory=dict)  # with record=True: the unmodified model's, last weights
    attention_heads: Any = None  # attention_heads.csv (decoders): first-token share, entropy per layer and head
    sink_rate: Any = None        # sink_rate.csv (decoders): fraction of heads above sink_threshold per layer
    mask: str = "bidirectional"  # the attention mask the variants ran with (decoders: causal or bidirectional)
    streamed: bool = False       # the pretrained layers were read one at a time


def run_model(model: ModelArgument, text: TextArgument = None,
              inputs: Any = None, samples: int = 32,
              tokens: int = 128, weights: str = "auto", variants: Sequence[str] = VARIANTS, compat: str = "none",
              draws: int = 100, iterate: int = 12, layer_norm: str = "keep", seed: int = 0,
              allow_nonfinite: bool = False, record: bool = False, frame: bool = False,
              tokenizer_dir: Optional[str] = None, mask: Optional[str] = None, sink_threshold: float = 0.3,
              stream: str = "auto", device: str = "cpu") -> ModelRun:
    """`rankscope model`: E1 (relative residual after the embeddings and each layer for each surgery), E2 (attention
    products along `draws` random paths per length; 0: no E2), the skip ratio α and, for USE lite, `iterate` applications of its
    pretrained second block's attention (blocks.1). `weights`: auto (pretrained and init; init only for a built-in
    configuration), pretrained, init or both. The batch: `inputs` (token ids: a .safetensors
    file as --inputs; a dict or a tokenizer's BatchEncoding with input_ids and optional attention_mask, token_type_ids; or
    the input ids alone as an array, tensor or list), else `text` (a file, or a list of sentences) packed into
    `samples` × `tokens`. Decoders: `mask` causal (default) or bidirectional for every variant, and the attention
    statistics of the unmodified model per head (attention_heads) and the sink rate per layer (sink_rate: heads whose
    mean attention to the first real token exceeds `sink_threshold`); `stream` as in Model. `device` (cpu, cuda,
    cuda:N) runs the forwards and measures there, as --device does (the tables come back to the CPU; a CUDA torch
    build is needed). Ctrl-C stops it within a layer."""
    source = model_source(model)
    check_count(draws, 0, 100000, "draws")  # 0: no E2
    check_count(iterate, 0, 1000, "iterate")
    check_count(seed, 0, 2**64 - 1, "seed")
    check_range(sink_threshold, 0, 1, "sink_threshold")  # as --sink-threshold
    variants = names(variants, "variants")
    for variant in variants:  # (the engine's message named "variant", Model.forward's setting)
        if variant not in VARIANTS:
            raise error(f"unknown variant {variant!r} (expected {', '.join(VARIANTS)})", "variants")
    if inputs is not None and text is not None:
        raise error("text and inputs exclude each other", "inputs")
    if inputs is None:
        batch = text_batch(source, text, samples, tokens, tokenizer_dir)
    elif isinstance(inputs, (str, os.PathLike)):
        batch = _rankscope.read_model_batch(source, os.fspath(inputs))
    else:
        batch = _given_batch(inputs)
    with progress_shown():
        result = _rankscope.run_model(source, batch, weights, variants, _compat(compat), layer_norm,
                                      draws, iterate, seed, flag(allow_nonfinite, "allow_nonfinite"),
                                      flag(record, "record"), mask or "", float(sink_threshold), stream, device)
    return ModelRun(model=result["model"], model_type=result["model_type"], weights=list(result["weights"]),
                    residual=as_table(result["residual"], frame), paths=as_table(result["paths"], frame),
                    skip_ratio=as_table(result["skip_ratio"], frame), iterate=as_table(result["iterate"], frame),
                    findings=result["findings"], batch=result["batch"], activations=dict(result["activations"]),
                    attention_heads=None if result["attention_heads"] is None else as_table(result["attention_heads"], frame),
                    sink_rate=None if result["sink_rate"] is None else as_table(result["sink_rate"], frame),
                    mask=result["mask"],
                    streamed=bool(result["streamed"]))
