"""Byte-level BPE (tokenizer.json: GPT-2, Llama 3, Qwen2 style) against an independent Python encoder written from the
published algorithm (OpenAI's GPT-2 encoder: regex pre-tokenization with the `regex` module, bytes_to_unicode, merges
by rank; Hugging Face's Split/ByteLevel/TemplateProcessing/NFC/ignore_merges semantics as documented).

The vocabulary and merges are learned here, by a few lines of byte-level BPE training on RTE sentences (test data, not
rankscope code), and written as three tokenizer.json files in the three layouts; `rankscope tokenize --format json`
must give the reference's ids for every sentence, including contractions, digits, whitespace runs, accents in both
Unicode forms, CJK, emoji and a special token inside the text. Unsupported files are refused in one line."""
import collections
import json
import os
import shutil
import sys
import tempfile
import unicodedata
import unittest

import regex

sys.path.insert(0, os.path.dirname(__file__))
from common import RTE, require, run  # noqa: E402

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                  r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                 r"""\s*[\r\n]+|\s+(?!\S)|\s+""")

SENTENCES = [
    "Hello world, don't you think it's fine? I'LL see; we'd've gone.",
    "Numbers: 1234567 and 3.14159 or 42nd, 2024-12-03.",
    "Spaces   between    words   and a tab\there.",
    "Accents: naïve café résumé (composed) and nai\u0308ve cafe\u0301 (decomposed).",
    "東京タワーは高い。 Ünïcödé ΑΒΓ δέλτα кириллица.",
    "Emoji 👍🏽 and symbols ©®™ ½ → ≠ ∞.",
    "hello<|endoftext|>world and <|begin_of_text|> inside.",
    "The cat sat on the mat. The cats sat on the mats!",
    # One 660-letter word (its merges run in the priority queue over many rounds) and long whitespace runs.
    "abracadabra" * 60,
    "a" + " " * 300 + "b\t\t\t  c" + " " * 40,
]


def bytes_to_unicode():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_SYMBOL = bytes_to_unicode()


def symbols_of(piece):
    return [BYTE_TO_SYMBOL[b] for b in piece.encode("utf-8")]


def learn_merges(texts, pattern, count):
    """Byte-level BPE training on the pre-tokenized words (test scaffolding): the most frequent pair, ties by first
    appearance, `count` times."""
    words = collections.Counter()
    for text in texts:
        for piece in regex.findall(pattern, text):
            words[tuple(symbols_of(piece))] += 1
    merges = []
    for _ in range(count):
        pairs = collections.Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda item: item[1])[0]
        merges.append(best)
        merged = collections.Counter()
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return merges


class ReferenceBpe:
    """The encoder, from the published algorithm."""

    def __init__(self, vocab, merges, pattern, added, ignore_merges=False, nfc=False, prefix=()):
        self.vocab, self.pattern, self.added, self.nfc, self.prefix = vocab, pattern, added, nfc, list(prefix)
        self.ranks = {}
        for rank, pair in enumerate(merges):
            self.ranks.setdefault(tuple(pair), rank)
        self.ignore_merges = ignore_merges

    def bpe(self, piece):
        word = symbols_of(piece)
        if self.ignore_merges and "".join(word) in self.vocab:
            return [self.vocab["".join(word)]]
        while len(word) > 1:
            pairs = [(self.ranks.get((a, b), float("inf")), i) for i, (a, b) in enumerate(zip(word, word[1:]))]
            rank, _ = min(pairs)
            if rank == float("inf"):
                break
            first, second = next((a, b) for a, b in zip(word, word[1:]) if self.ranks.get((a, b)) == rank)
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == first and word[i + 1] == second:
                    out.append(first + second)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        return [self.vocab[symbol] for symbol in word]

    def encode_plain(self, text):
        ids, at = [], 0
        for match in regex.finditer(self.pattern, text):
            if match.start() > at:
                ids += self.bpe(text[at:match.start()])
            ids += self.bpe(match.group())
            at = match.end()
        if at < len(text):
            ids += self.bpe(text[at:])
        return ids

    def encode(self, text):
        if self.nfc:
            text = unicodedata.normalize("NFC", text)
        names = sorted(self.added, key=len, reverse=True)
        ids, start, at = [], 0, 0
        while at < len(text):
            name = next((n for n in names if text.startswith(n, at)), None)
            if name is None:
                at += 1
                continue
            ids += self.encode_plain(text[start:at]) + [self.added[name]]
            at += len(name)
            start = at
        return ids + self.encode_plain(text[start:])


class ByteLevelBpe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require(RTE)
        cls.directory = tempfile.mkdtemp(prefix="rankscope-bpe-")
        with open(RTE, encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:400]
        cls.training = [text for row in rows for text in row[1:3]] + SENTENCES[:3]
        cls.text = os.path.join(cls.directory, "sentences.txt")
        with open(cls.text, "w", encoding="utf-8") as f:
            f.write("\n".join(SENTENCES + [row[1] for row in rows[:40]]) + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.directory)

    def make_folder(self, name, pattern, style):
        merges = learn_merges(self.training, pattern, 400)
        vocab = {symbol: i for i, symbol in enumerate(BYTE_TO_SYMBOL[b] for b in range(256))}
        for a, b in merges:
            vocab.setdefault(a + b, len(vocab))
        specials = ["<|endoftext|>"] if style == "gpt2" else ["<|begin_of_text|>", "<|endoftext|>"]
        added = {content: len(vocab) + i for i, content in enumerate(specials)}
        split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": style == "gpt2"}
        document = {
            "version": "1.0",
            "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for c, i in added.items()],
            "normalizer": {"type": "NFC"} if style == "qwen2" else None,
            "pre_tokenizer": byte_level if style == "gpt2" else {"type": "Sequence", "pretokenizers": [split, byte_level]},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": style == "llama3", "vocab": vocab,
                      "merges": [f"{a} {b}" for a, b in merges] if style == "gpt2" else [[a, b] for a, b in merges]},
        }
        prefix = []
        if style == "llama3":
            bos = added["<|begin_of_text|>"]
            document["post_processor"] = {"type": "Sequence", "processors": [
                {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
                {"type": "TemplateProcessing",
                 "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                 "pair": [], "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos],
                                                                      "tokens": ["<|begin_of_text|>"]}}}]}
            prefix = [bos]
        folder = os.path.join(self.directory, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(document, f, ensure_ascii=False)
        config = {"model_type": "gpt2", "vocab_size": len(vocab) + len(added), "n_embd": 16, "n_layer": 1, "n_head": 2,
                  "n_positions": 64}
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        reference = ReferenceBpe(vocab, merges, pattern, added, ignore_merges=style == "llama3", nfc=style == "qwen2",
                                 prefix=prefix)
        return folder, reference

    def check(self, name, pattern, style):
        folder, reference = self.make_folder(name, pattern, style)
        document = json.loads(run("tokenize", "--model", folder, "--text", self.text, "--format", "json").stdout)
        self.assertEqual(document["prefix"], reference.prefix)
        self.assertEqual(document["suffix"], [])
        self.assertEqual(len(document["sentences"]), len(SENTENCES) + 40)
        merged_somewhere = False
        for sentence in document["sentences"]:
            expected = reference.encode(sentence["text"])
            self.assertEqual(sentence["token_ids"], expected, sentence["text"])
            merged_somewhere |= len(expected) < len(sentence["text"].encode("utf-8"))
        self.assertTrue(merged_somewhere, "no merge applied: the test would not see a wrong merge order")
        return document, reference

    def test_gpt2_layout(self):
        document, reference = self.check("gpt2", GPT2_PATTERN, "gpt2")
        special = next(s for s in document["sentences"] if "<|endoftext|>" in s["text"])
        self.assertIn(reference.added["<|endoftext|>"], special["token_ids"])  # matched inside the text, not split by bytes

    def test_llama3_layout(self):
        document, reference = self.check("llama3", LLAMA3_PATTERN, "llama3")
        self.assertEqual(document["prefix"], [reference.added["<|begin_of_text|>"]])  # TemplateProcessing's BOS

    def test_qwen2_layout_with_nfc(self):
        document, reference = self.check("qwen2", QWEN2_PATTERN, "qwen2")
        accents = next(s for s in document["sentences"] if s["text"].startswith("Accents"))
        reference.nfc = False  # the check is discriminating: without NFC the decomposed words give other ids
        self.assertNotEqual(reference.encode(accents["text"]), accents["token_ids"])

    def test_unsupported_files_are_refused_in_one_line(self):
        folder, _ = self.make_folder("refused", GPT2_PATTERN, "gpt2")
        path = os.path.join(folder, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            good = json.load(f)
        cases = [
            (lambda d: d["model"].update(byte_fallback=True), "byte_fallback"),
            (lambda d: d.update(pre_tokenizer={"type": "Metaspace", "replacement": "\u2581"}), "pre_tokenizer"),
            # A BPE file relabelled WordPiece reaches the WordPiece reader, which refuses its BPE fields.
            (lambda d: d["model"].update(type="WordPiece"), "continuing_subword_prefix"),
            (lambda d: d["model"]["merges"].append("zz qq"), "not in the vocabulary"),
            (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "use_regex": False}]}), "does not compile"),
            # A pattern that compiles but fails at match time: PCRE2's words, not "PCRE2 error -52".
            (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": "(?R)"}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "use_regex": False}]}), "pattern failed on the text: nested recursion at the same subject position"),
        ]
        for change, message in cases:
            with self.subTest(message=message):
                document = json.loads(json.dumps(good))
                change(document)
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(document, f)
                result = run("tokenize", "--model", folder, "--text", self.text, check=False)
                self.assertEqual(result.returncode, 2, result.stderr)
                lines = result.stderr.strip().split("\n")
                self.assertEqual(len(lines), 1, result.stderr)
                self.assertIn(message, lines[0])
                self.assertIn("tokenizer.json", lines[0])

    def test_work_is_bounded_on_hostile_patterns_and_long_pieces(self):
        folder, reference = self.make_folder("bounded", GPT2_PATTERN, "gpt2")
        long_text = os.path.join(self.directory, "long.txt")
        with open(long_text, "w", encoding="utf-8") as f:
            f.write("ab" * 32768 + "\n")
        # A 64 kB piece is merged whole (a quadratic merge loop took minutes here); the ids spell the text back.
        document = json.loads(run("tokenize", "--model", folder, "--text", long_text, "--format", "json").stdout)
        ids = document["sentences"][0]["token_ids"]
        # The reference merges every occurrence of the best pair per round: a few rounds here, fast in Python too.
        self.assertEqual(ids, reference.encode("ab" * 32768))
        self.assertLess(len(ids), 65536)  # merged
        # A pattern that looks to the end of the text at every position: quadratic work, refused in one line.
        path = os.path.join(folder, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        document["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "[ab](?=[ab]*$)"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "use_regex": False}]}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(document, f)
        result = run("tokenize", "--model", folder, "--text", long_text, check=False)
        self.assertEqual(result.returncode, 2, result.stderr)
        lines = result.stderr.strip().split("\n")
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn("scans more than", lines[0])
        self.assertIn("tokenizer.json", lines[0])
        # The same pattern on ordinary text stays within the budget and gives the reference's pieces.
        ordinary = os.path.join(self.directory, "ordinary.txt")
        with open(ordinary, "w", encoding="utf-8") as f:
            f.write("abba baab\n")
        self.assertEqual(run("tokenize", "--model", folder, "--text", ordinary, check=False).returncode, 0)

    def test_invalid_utf8_is_blamed_on_the_text_file(self):
        folder, _ = self.make_folder("utf8", GPT2_PATTERN, "gpt2")
        bad = os.path.join(self.directory, "bad.txt")
        with open(bad, "wb") as f:
            f.write(b"fine line\nsecond \xff line\n")
        result = run("tokenize", "--model", folder, "--text", bad, check=False)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stderr.strip(),
                         f"rankscope: error: line 2 is not valid UTF-8 (byte 8 of the line: 0xff) ({bad})")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
