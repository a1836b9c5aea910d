"""The Llama family's SentencePiece tokenizer (Llama 2, Mistral: tokenizer.model beside config.json) against the
SentencePiece Python package (python3-sentencepiece) with Hugging Face LlamaTokenizer's framing: <s> first (unless
tokenizer_config.json's add_bos_token is false), </s> last only when add_eos_token is true, the text passed as it is.

The model is trained here on RTE sentences with Llama 2's trainer settings (BPE, byte fallback, split digits, dummy
prefix, whitespace kept), so unknown characters go through byte pieces. The Python package and rankscope's helper
both wrap Google's SentencePiece library (Debian builds both from the same source): what this checks is rankscope's
side (which file is read, the framing, the text handed over untouched, the ids packed into a model's batch), not the
library's segmentation."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import sentencepiece

sys.path.insert(0, os.path.dirname(__file__))
from common import RTE, read_safetensors, require, run  # noqa: E402

SENTENCES = [
    "Hello world, don't you think it's fine?",
    "Numbers: 1234567 and 3.14159 or 42nd, 2024-12-03.",
    "Spaces   between    words and a tab\there.",
    "Accents: naïve café résumé and nai\u0308ve cafe\u0301 (decomposed).",
    "東京タワーは高い。 Ünïcödé ΑΒΓ δέλτα кириллица.",
    "Emoji 👍🏽 and symbols ©®™ ½ → ≠ ∞.",
    "  leading and trailing spaces  ",
]


def rte_sentences(count):
    with open(RTE, encoding="utf-8") as f:
        header = next(f).rstrip("\n").split("\t")
        columns = [header.index("sentence1"), header.index("sentence2")]
        out = []
        for line in f:
            fields = line.rstrip("\n").split("\t")
            out.extend(fields[c] for c in columns if c < len(fields))
            if len(out) >= count:
                break
    return out


class LlamaSentencePiece(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require(RTE)
        cls.folder = tempfile.mkdtemp(prefix="rankscope-llama-spm-")
        corpus = os.path.join(cls.folder, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("\n".join(rte_sentences(3000)) + "\n")
        prefix = os.path.join(cls.folder, "spm")
        sentencepiece.SentencePieceTrainer.train(
            input=corpus, model_prefix=prefix, vocab_size=1200, model_type="bpe", byte_fallback=True,
            split_digits=True, add_dummy_prefix=True, remove_extra_whitespaces=False, normalization_rule_name="identity",
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, character_coverage=0.9995, minloglevel=2, num_threads=1)
        cls.model = os.path.join(cls.folder, "llama")
        os.makedirs(cls.model)
        shutil.copy(prefix + ".model", os.path.join(cls.model, "tokenizer.model"))
        cls.config = {"model_type": "llama", "vocab_size": 1200, "hidden_size": 16, "intermediate_size": 24,
                      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
        with open(os.path.join(cls.model, "config.json"), "w") as f:
            json.dump(cls.config, f)
        # The same tokenizer as Hugging Face also ships it: a tokenizer.json in the byte_fallback form, which the
        # byte-level BPE reader refuses; tokenizer.model must be the one read.
        with open(os.path.join(cls.model, "tokenizer.json"), "w") as f:
            json.dump({"model": {"type": "BPE", "byte_fallback": True, "vocab": {}, "merges": []}}, f)
        cls.text = os.path.join(cls.folder, "sentences.txt")
        with open(cls.text, "w", encoding="utf-8") as f:
            f.write("\n".join(SENTENCES) + "\n")
        cls.reference = sentencepiece.SentencePieceProcessor(model_file=prefix + ".model")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, ignore_errors=True)

    def tokenize(self):
        return json.loads(run("tokenize", "--model", self.model, "--text", self.text, "--format", "json").stdout)

    def write_tokenizer_config(self, **flags):
        path = os.path.join(self.model, "tokenizer_config.json")
        if flags:
            with open(path, "w") as f:
                json.dump(flags, f)
        elif os.path.exists(path):
            os.remove(path)

    def test_ids_and_framing_equal_the_reference(self):
        self.write_tokenizer_config()
        got = self.tokenize()
        self.assertTrue(got["tokenizer"].endswith("tokenizer.model"), got["tokenizer"])
        self.assertEqual(got["prefix"], [self.reference.bos_id()])  # LlamaTokenizer: <s> first
        self.assertEqual(got["suffix"], [])                         # no </s>
        self.assertEqual(got["vocab_size"], 1200)
        self.assertEqual(len(got["sentences"]), len(SENTENCES))
        # Each line as it is, leading and trailing spaces included (LlamaTokenizer does not strip either).
        for sentence, expected_text in zip(got["sentences"], SENTENCES):
            self.assertEqual(sentence["text"], expected_text)
            self.assertEqual(sentence["token_ids"], self.reference.encode(expected_text), expected_text)
        # The byte pieces are in use (characters the RTE model never saw) and whitespace runs are kept.
        emoji = self.reference.encode(SENTENCES[5])
        self.assertTrue(any(self.reference.is_byte(i) for i in emoji))
        self.assertNotEqual(self.reference.encode("a   b"), self.reference.encode("a b"))

    def test_add_bos_and_add_eos_from_tokenizer_config(self):
        self.write_tokenizer_config(add_bos_token=False, add_eos_token=True)
        try:
            got = self.tokenize()
        finally:
            self.write_tokenizer_config()
        self.assertEqual(got["prefix"], [])
        self.assertEqual(got["suffix"], [self.reference.eos_id()])

    def test_settings_not_implemented_are_refused_and_line_breaks_named(self):
        # add_prefix_space false (LlamaTokenizerFast drops the dummy "▁") is not done here: refused, not ignored.
        self.write_tokenizer_config(add_prefix_space=False)
        try:
            result = run("tokenize", "--model", self.model, "--text", self.text, check=False)
        finally:
            self.write_tokenizer_config()
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("add_prefix_space false (no \"▁\" before the text) is not supported for tokenizer.model",
                      result.stderr)
        # A carriage return inside a sentence: the sentence and the byte are named.
        text = os.path.join(self.folder, "carriage.txt")
        with open(text, "w", encoding="utf-8", newline="") as f:
            f.write("first line\nsecond\rhalf\n")
        result = run("tokenize", "--model", self.model, "--text", text, check=False)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn('sentence 2 holds a carriage return at byte 7 ("second\\x0dhalf...")', result.stderr)

    def test_model_packs_text_with_the_bos_first(self):
        self.write_tokenizer_config()
        out = os.path.join(self.folder, "out")
        dump = os.path.join(self.folder, "dump.safetensors")
        run("model", "--model", self.model, "--weights", "init", "--text", self.text, "--samples", 2, "--tokens", 12,
            "--variants", "transformer", "--draws", 0, "--dump", dump, "--out", out)
        tensors = read_safetensors(dump)
        ids = tensors["input_ids"]
        self.assertEqual(ids.shape, (2, 12))
        self.assertTrue((ids[:, 0] == self.reference.bos_id()).all(), ids)
        # The content after <s> continues the sentences' ids in order.
        stream = [i for s in SENTENCES for i in self.reference.encode(s)]
        self.assertEqual(list(ids[0, 1:]), stream[:11])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
