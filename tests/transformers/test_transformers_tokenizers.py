"""Every tokenizer rankscope reads, judged by transformers' own tokenizers, slow (Python) and fast (`tokenizers`).

The tokenizer files are real where a package ships one (all-MiniLM-L6-v2's vocab.txt and its WordPiece tokenizer.json,
installed by scripts/install-deps.sh) and otherwise trained here on RTE with the libraries made for it (sentencepiece's
trainer, the `tokenizers` trainers): SentencePiece spiece.model (ALBERT, XLNet), a Llama-2-style tokenizer.model (BPE
with byte fallback), a cased WordPiece vocab.txt, and byte-level BPE tokenizer.json files with the GPT-2 (also with RoBERTa's
<s> x </s>), Llama 3 and Qwen2 pre-tokenizer patterns. `rankscope tokenize --format json` must give, for 32 RTE sentences and awkward text
(NFKC/NFC cases, CJK, emoji, whitespace runs, very long words), exactly the ids of transformers' tokenizer:
content ids = tokenizer(text, add_special_tokens=False), and prefix + content + suffix = tokenizer(text)."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from judge import REPO, Table, rte_sentences, run  # noqa: E402

import sentencepiece  # noqa: E402
import tokenizers  # noqa: E402
import transformers  # noqa: E402

MINILM = os.path.join(REPO, "models", "all-MiniLM-L6-v2")
MINILM_ZIP = os.path.join(REPO, "models", "all-MiniLM-L6-v2-zip")
TABLE = Table("transformers 4.57.6 tokenizers vs rankscope tokenize (sentences with identical ids / sentences)")

AWKWARD = [
    "Ligatures ﬁ ﬂ, full-width ＡＢＣ１２３, circled ① ②, superscript x² and the ohm sign Ω.",
    "Composed Å é ñ and decomposed A\u030a e\u0301 n\u0303 side by side.",
    "Café naïve résumé coöperate façade SMÖRGÅSBORD Straße İstanbul ΣΊΣΥΦΟΣ.",
    "東京タワーは高い。漢字かな交じり文と한국어 텍스트, 中文標點：「引號」！",
    "Emoji 👍🏽 👩‍👩‍👧 🇫🇷 😀😀😀 and symbols ©®™ ½ → ≠ ∞.",
    "Whitespace   runs\t\tand   tabs    inside     a line.",
    "A very long word: " + "supercalifragilisticexpialidocious" * 4 + " and " + "x" * 120 + " end.",
    "Numbers 1234567 3.14159 1,000,000 42nd 2024-12-04 and contractions don't I'll we'd've.",
    "Punctuation ¿¡…—–‘’“” and code x_1 = f(y)**2; {a: [1, 2]} <tag/> #hash @user.",
    "Zero\u200bwidth space, soft\u00adhyphen, combining\u0301 mark, and Ǆ ǅ ǆ digraphs.",
    "Line\u2028separator, paragraph\u2029separator, private\ue000use, next\x85line, form\x0cfeed, vertical\x0btab, "
    "unit\x1fseparator.",
]


# Special-token strings inside the text: transformers matches them as single tokens (slow: tokens_trie; fast:
# AddedVocabulary), with their lstrip (ALBERT's [MASK], XLNet's <mask>), before the tokenizer's own model.
SPECIAL = [
    "Paris is the [MASK] of France.",
    "a[MASK]b [CLS][SEP] [mask] [PAD]x [UNK]",
    "The <mask> of <sep> France<cls>.",
    "hello <s>world</s> x <unk>y <pad>",
    "  [MASK]  spaced   <mask>  out  ",
    "[MASK]",
    "x [SEP]",
    "[MASK][MASK] <mask><mask> end",
    "Two\u00a0[MASK] and\u3000<mask> after wide spaces.",
    "Upper-case forms <UNK> <PAD> <S> [Mask] of lower-case ones.",
]


def texts():
    return rte_sentences(32) + AWKWARD


def write_config(folder, model_type, vocab_size):
    """A small config.json of the architecture, written by transformers (rankscope reads the tokenizer beside it)."""
    sizes = {"xlnet": dict(d_model=32, n_layer=1, n_head=4, d_inner=48),
             "gpt2": dict(n_embd=32, n_layer=1, n_head=4)}.get(
        model_type, dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=48))
    if model_type in ("llama", "mistral", "qwen2"):
        sizes["num_key_value_heads"] = 4
    transformers.AutoConfig.for_model(model_type, vocab_size=vocab_size, **sizes).save_pretrained(folder)


def rankscope_ids(folder, sentences, scratch):
    text = os.path.join(scratch, "text.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")
    document = json.loads(run("tokenize", "--model", folder, "--text", text, "--format", "json").stdout)
    got = [entry["token_ids"] for entry in document["sentences"]]
    if [entry["text"] for entry in document["sentences"]] != sentences:
        raise AssertionError("rankscope read other sentences than it was given")
    return document["prefix"], got, document["suffix"]


class TransformersJudgesTokenizers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="rankscope-tokenizers-")
        cls.sentences = texts()
        with open(os.path.join(cls.scratch, "corpus.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(rte_sentences(2000)) + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)
        TABLE.emit()

    def judge(self, case, folder, reference, exclude=(), sentences=None):
        """rankscope against `reference` on every sentence (of `sentences`, else the shared ones) but those in
        `exclude` (where transformers' own slow and fast tokenizers disagree with each other; the caller checks that
        rankscope follows the other one there)."""
        sentences = self.sentences if sentences is None else sentences
        prefix, got, suffix = rankscope_ids(folder, sentences, self.scratch)
        agree = 0
        failures = []
        for text, ids in zip(sentences, got):
            if text in exclude:
                continue
            content = reference(text, add_special_tokens=False)["input_ids"]
            framed = reference(text)["input_ids"]
            if ids == content and prefix + ids + suffix == framed:
                agree += 1
            else:
                failures.append(f"{text!r}:\n    rankscope    {prefix} {ids} {suffix}\n"
                                f"    transformers {content} framed {framed}")
        judged = len(sentences) - len(exclude)
        TABLE.rows.append({"case": case + (f" ({len(exclude)} left out: slow ≠ fast)" if exclude else ""),
                           "hook": f"{agree}/{judged}", "worst_relative_difference": float(judged - agree),
                           "tolerance": 0.0})
        self.assertFalse(failures, f"{case}: {len(failures)} of {judged} sentences differ:\n" + "\n".join(failures[:4]))

    def slow_fast_disagreements(self, slow, fast, sentences=None):
        return {text for text in (self.sentences if sentences is None else sentences)
                if slow(text)["input_ids"] != fast(text)["input_ids"]}

    def folder(self, name):
        path = os.path.join(self.scratch, name)
        os.makedirs(path, exist_ok=True)
        return path

    # ---- WordPiece ------------------------------------------------------------------------------------------------
    def test_minilm_vocab_txt_slow_and_fast(self):
        for fast in (False, True):
            reference = transformers.AutoTokenizer.from_pretrained(MINILM, use_fast=fast)
            self.assertEqual(reference.is_fast, fast)
            self.judge(f"all-MiniLM-L6-v2 vocab.txt (uncased), {'fast' if fast else 'slow'}", MINILM, reference)

    def test_minilm_zip_tokenizer_json_wordpiece(self):
        self.assertFalse(os.path.exists(os.path.join(MINILM_ZIP, "vocab.txt")), "the zip package ships no vocab.txt")
        reference = transformers.BertTokenizerFast(tokenizer_file=os.path.join(MINILM_ZIP, "tokenizer.json"))
        self.judge("all-MiniLM-L6-v2-zip tokenizer.json (WordPiece), fast", MINILM_ZIP, reference)

    def test_cased_wordpiece_trained_here(self):
        folder = self.folder("bert-cased")
        trainer = tokenizers.BertWordPieceTokenizer(lowercase=False, strip_accents=False)
        trainer.train([os.path.join(self.scratch, "corpus.txt")], vocab_size=3000, min_frequency=2)
        trainer.save_model(folder)
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": False}, f)
        write_config(folder, "bert", 3000)
        vocab = os.path.join(folder, "vocab.txt")
        slow = transformers.BertTokenizer(vocab, do_lower_case=False)
        fast = transformers.BertTokenizerFast(vocab, do_lower_case=False)
        # transformers 4.57's slow BasicTokenizer composes the text (NFC) before splitting; the fast BertNormalizer does
        # not, so cased text with decomposed accents gets other ids from the two. rankscope follows the fast one
        # (AutoTokenizer's default); the sentences where they disagree are judged against fast only.
        disagree = self.slow_fast_disagreements(slow, fast)
        self.assertEqual(disagree, {AWKWARD[1]}, "transformers' slow and fast cased BertTokenizer disagree elsewhere")
        self.judge("cased WordPiece vocab.txt (trained), fast", folder, fast)
        self.judge("cased WordPiece vocab.txt (trained), slow", folder, slow, exclude=disagree)

    def test_wordpiece_settings_of_tokenizer_config(self):
        # BertTokenizer's do_lower_case (true when absent), strip_accents (null: as do_lower_case) and
        # tokenize_chinese_chars: each was read as the vocabulary's case alone (a tokenizer's helper found 12/70, 60/70
        # and 67/70 sentences agreeing). A vocabulary that keeps accents, so that stripping them shows.
        trainer = tokenizers.BertWordPieceTokenizer(lowercase=True, strip_accents=False)
        trainer.train([os.path.join(self.scratch, "corpus.txt")], vocab_size=3000, min_frequency=2)
        for name, settings in [("no tokenizer_config.json (do_lower_case true)", None),
                               ("strip_accents false", {"do_lower_case": True, "strip_accents": False}),
                               ("tokenize_chinese_chars false", {"tokenize_chinese_chars": False}),
                               ("cased, strip_accents true", {"do_lower_case": False, "strip_accents": True})]:
            folder = self.folder("bert-" + name.split()[0].replace(",", ""))
            trainer.save_model(folder)
            write_config(folder, "bert", 3000)
            if settings is not None:
                with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
                    json.dump(settings, f)
            fast = transformers.BertTokenizerFast(os.path.join(folder, "vocab.txt"), **(settings or {}))
            self.judge(f"WordPiece vocab.txt, {name}, fast", folder, fast)

    def test_wordpiece_tokenizer_json_post_processors(self):
        # The special tokens around the text come from the json's post_processor (they were always [CLS] x [SEP]).
        with open(os.path.join(MINILM_ZIP, "tokenizer.json"), encoding="utf-8") as f:
            original = json.load(f)
        cls_id, sep_id = original["model"]["vocab"]["[CLS]"], original["model"]["vocab"]["[SEP]"]
        template = {"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [cls_id], "tokens": ["[CLS]"]},
                                       "[SEP]": {"id": "[SEP]", "ids": [sep_id], "tokens": ["[SEP]"]}}}
        bert = {"type": "BertProcessing", "sep": ["[SEP]", sep_id], "cls": ["[CLS]", cls_id]}
        for name, post in [("null", None), ("[CLS] $A [SEP] [SEP]", template), ("BertProcessing", bert)]:
            folder = self.folder("wordpiece-post-" + str(abs(hash(name))))
            with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
                json.dump({**original, "post_processor": post}, f)
            write_config(folder, "bert", len(original["model"]["vocab"]))
            self.judge(f"WordPiece tokenizer.json, post_processor {name}, fast", folder,
                       transformers.BertTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json")))

    def test_albert_keep_accents(self):
        folder = self.folder("albert-keep-accents")
        model = self.train_sentencepiece(folder, "spiece", model_type="unigram", pad_id=0, unk_id=1, bos_id=-1,
                                         eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"])
        write_config(folder, "albert", 1200)
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"keep_accents": True}, f)
        self.judge("ALBERT spiece.model, keep_accents true, slow", folder,
                   transformers.AlbertTokenizer(model, keep_accents=True))

    # ---- special tokens in the text -------------------------------------------------------------------------------
    def test_special_tokens_in_text_wordpiece(self):
        # They were read as characters ("[MASK]" gave "[", "mask", "]"); a warning said so.
        for fast in (False, True):
            self.judge(f"all-MiniLM-L6-v2 vocab.txt, special tokens in the text, {'fast' if fast else 'slow'}", MINILM,
                       transformers.AutoTokenizer.from_pretrained(MINILM, use_fast=fast), sentences=SPECIAL)
        self.judge("all-MiniLM-L6-v2-zip tokenizer.json, special tokens in the text, fast", MINILM_ZIP,
                   transformers.BertTokenizerFast(tokenizer_file=os.path.join(MINILM_ZIP, "tokenizer.json")),
                   sentences=SPECIAL)

    def test_special_tokens_named_in_tokenizer_config(self):
        # A vocab.txt whose special tokens have other names, given by tokenizer_config.json as transformers'
        # save_pretrained writes it (*_token, added_tokens_decoder with <mask>'s lstrip, an additional special token).
        # It was refused ("vocabulary has no [UNK]").
        folder = self.folder("wordpiece-renamed")
        names = {"[UNK]": "<unk>", "[CLS]": "<s>", "[SEP]": "</s>", "[PAD]": "<pad>", "[MASK]": "<mask>"}
        with open(os.path.join(MINILM, "vocab.txt"), encoding="utf-8") as f:
            pieces = [names.get(line.rstrip("\n"), line.rstrip("\n")) for line in f]
        vocab = os.path.join(self.scratch, "renamed-vocab.txt")
        with open(vocab, "w", encoding="utf-8") as f:
            f.write("\n".join(pieces) + "\n")
        slow = transformers.BertTokenizer(vocab, unk_token="<unk>", cls_token="<s>", sep_token="</s>", pad_token="<pad>",
                                          mask_token=transformers.AddedToken("<mask>", lstrip=True, normalized=False))
        slow.add_special_tokens({"additional_special_tokens": ["<extra_id>"]})
        slow.add_tokens(["Covid19"])  # not special: normalized (lower-cased) and matched in the normalized text
        slow.save_pretrained(folder)
        write_config(folder, "bert", len(slow))
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
            written = json.load(f)
        self.assertEqual(written["added_tokens_decoder"][str(len(pieces))]["content"], "<extra_id>")
        self.assertTrue(written["added_tokens_decoder"][str(pieces.index("<mask>"))]["lstrip"])
        sentences = SPECIAL + ["An <extra_id> token, <s> and </s> inside, a <mask>  here.",
                               "COVID19, Covid19 and covid19 cases; covid19s."] + self.sentences[:7]
        # transformers' slow BertTokenizer lower-cases "<UNK>" to its "<unk>" before matching, the fast one does not:
        # rankscope follows the fast one, and that sentence is the only disagreement.
        self.judge_slow_and_fast("vocab.txt with renamed special tokens (tokenizer_config.json)", folder, sentences,
                                 {SPECIAL[9]})
        reference = transformers.AutoTokenizer.from_pretrained(folder)
        covid = reference.convert_tokens_to_ids("covid19")
        self.assertEqual(reference(sentences[len(SPECIAL) + 1])["input_ids"].count(covid), 4)  # each case form
        # The same folder as transformers before 4.34 saved it: no added_tokens_decoder, so the special tokens come
        # from special_tokens_map.json and the added ones from added_tokens.json (they were not read).
        legacy = self.folder("wordpiece-renamed-legacy")
        shutil.copytree(folder, legacy, dirs_exist_ok=True)
        with open(os.path.join(legacy, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        del config["added_tokens_decoder"]
        for role in ("unk_token", "cls_token", "sep_token", "pad_token", "mask_token", "additional_special_tokens"):
            config.pop(role, None)  # only in special_tokens_map.json, as the oldest folders have them
        with open(os.path.join(legacy, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        self.assertTrue(os.path.exists(os.path.join(legacy, "added_tokens.json")))
        self.assertTrue(os.path.exists(os.path.join(legacy, "special_tokens_map.json")))
        self.judge_slow_and_fast("the same, saved before added_tokens_decoder (special_tokens_map.json, "
                                 "added_tokens.json)", legacy, sentences, {SPECIAL[9]})

    def judge_slow_and_fast(self, case, folder, sentences, expected_disagreements):
        """AutoTokenizer's fast tokenizer on every sentence, the slow one on those where the two agree (which must be
        all but `expected_disagreements`)."""
        slow = transformers.AutoTokenizer.from_pretrained(folder, use_fast=False)
        fast = transformers.AutoTokenizer.from_pretrained(folder, use_fast=True)
        disagree = self.slow_fast_disagreements(slow, fast, sentences)
        self.assertEqual(disagree, expected_disagreements, f"{case}: transformers' slow and fast disagree elsewhere")
        self.judge(f"{case}, fast", folder, fast, sentences=sentences)
        self.judge(f"{case}, slow", folder, slow, exclude=disagree, sentences=sentences)

    def test_special_tokens_in_text_sentencepiece(self):
        # ALBERT and XLNet: transformers' fast tokenizers give the space before a special token (and at the end) a "▁"
        # of its own, the slow ones do not; rankscope follows the slow ones (the pieces between special tokens
        # prepared and encoded each on its own) and the sentences where the two disagree are listed.
        options = {"albert": dict(pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"]),
                   "xlnet": dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1, control_symbols=["<cls>", "<sep>", "<pad>", "<mask>"])}
        classes = {"albert": (transformers.AlbertTokenizer, transformers.AlbertTokenizerFast),
                   "xlnet": (transformers.XLNetTokenizer, transformers.XLNetTokenizerFast)}
        expected_disagreements = {
            "albert": {SPECIAL[1], SPECIAL[3], SPECIAL[4], SPECIAL[6], SPECIAL[9]},
            "xlnet": {SPECIAL[2], SPECIAL[3], SPECIAL[4]}}
        for model_type in ("albert", "xlnet"):
            folder = self.folder(model_type + "-special")
            model = self.train_sentencepiece(folder, "spiece", model_type="unigram", **options[model_type])
            write_config(folder, model_type, 1200)
            slow_class, fast_class = classes[model_type]
            slow, fast = slow_class(model), fast_class(model)
            disagree = self.slow_fast_disagreements(slow, fast, SPECIAL)
            self.assertEqual(disagree, expected_disagreements[model_type],
                             f"{model_type}: transformers' slow and fast tokenizers disagree elsewhere")
            self.judge(f"{model_type} spiece.model, special tokens in the text, slow", folder, slow, sentences=SPECIAL)
            self.judge(f"{model_type} spiece.model, special tokens in the text, fast", folder, fast, exclude=disagree,
                       sentences=SPECIAL)

    # ---- SentencePiece --------------------------------------------------------------------------------------------
    def train_sentencepiece(self, folder, name, **options):
        sentencepiece.SentencePieceTrainer.train(
            input=os.path.join(self.scratch, "corpus.txt"), model_prefix=os.path.join(folder, name),
            vocab_size=1200, character_coverage=1.0, num_threads=1, minloglevel=2, **options)
        return os.path.join(folder, name + ".model")

    def judge_spiece(self, model_type, name, slow_class, fast_class, **options):
        """A unigram spiece.model trained here, judged by the architecture's slow and fast tokenizer. The two disagree
        on the line of separators and controls (\\x85, \\x0b, \\x1f: Python's str.split, in the slow
        preprocess_text, splits there); rankscope follows the slow one."""
        folder = self.folder(model_type)
        model = self.train_sentencepiece(folder, "spiece", model_type="unigram", **options)
        write_config(folder, model_type, 1200)
        slow, fast = slow_class(model), fast_class(model)
        disagree = self.slow_fast_disagreements(slow, fast)
        self.assertEqual(disagree, {AWKWARD[-1]}, f"{name}: transformers' slow and fast tokenizers disagree elsewhere")
        self.judge(f"{name} spiece.model (trained), slow", folder, slow)
        self.judge(f"{name} spiece.model (trained), fast", folder, fast, exclude=disagree)

    def test_albert_spiece_slow_and_fast(self):
        self.judge_spiece("albert", "ALBERT", transformers.AlbertTokenizer, transformers.AlbertTokenizerFast,
                          pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
                          user_defined_symbols=[])

    def test_xlnet_spiece_slow_and_fast(self):
        self.judge_spiece("xlnet", "XLNet", transformers.XLNetTokenizer, transformers.XLNetTokenizerFast,
                          unk_id=0, bos_id=1, eos_id=2, pad_id=-1, control_symbols=["<cls>", "<sep>", "<pad>", "<mask>"])

    def test_llama2_tokenizer_model_slow_and_fast(self):
        folder = self.folder("llama2")
        model = self.train_sentencepiece(folder, "tokenizer", model_type="bpe", byte_fallback=True, unk_id=0,
                                         bos_id=1, eos_id=2, pad_id=-1, split_digits=True,
                                         allow_whitespace_only_pieces=True, normalization_rule_name="identity",
                                         remove_extra_whitespaces=False, add_dummy_prefix=True)
        write_config(folder, "llama", 1200)
        for fast in (False, True):
            cls = transformers.LlamaTokenizerFast if fast else transformers.LlamaTokenizer
            # The fast one converted from the bare tokenizer.model needs add_prefix_space=True: without it transformers
            # 4.57 drops SentencePiece's dummy prefix "▁" (real Llama 2 folders ship a tokenizer.json with Prepend("▁")).
            reference = cls(vocab_file=model, legacy=True, add_bos_token=True, add_eos_token=False) if not fast \
                else cls(vocab_file=model, legacy=True, add_bos_token=True, add_eos_token=False, from_slow=True,
                         add_prefix_space=True)
            self.judge(f"Llama 2 tokenizer.model (trained BPE, byte fallback), {'fast' if fast else 'slow'}", folder,
                       reference)
            self.judge(f"Llama 2 tokenizer.model, special tokens in the text, {'fast' if fast else 'slow'}", folder,
                       reference, sentences=SPECIAL)

    # ---- byte-level BPE -------------------------------------------------------------------------------------------
    def byte_level(self, name, pattern, model_type, special, vocab_size=2000):
        folder = self.folder(name)
        model = tokenizers.models.BPE()
        tokenizer = tokenizers.Tokenizer(model)
        if pattern is None:  # GPT-2: ByteLevel's own regex
            tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        else:
            tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Sequence([
                tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="isolated", invert=False),
                tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
            tokenizer.normalizer = tokenizers.normalizers.NFC() if model_type == "qwen2" else None
        tokenizer.decoder = tokenizers.decoders.ByteLevel()
        trainer = tokenizers.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                                 initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
                                                 show_progress=False)
        tokenizer.train([os.path.join(self.scratch, "corpus.txt")], trainer)
        if model_type == "llama":
            begin = special[0]
            tokenizer.post_processor = tokenizers.processors.TemplateProcessing(
                single=f"{begin} $A", pair=f"{begin} $A {begin} $B", special_tokens=[(begin, tokenizer.token_to_id(begin))])
        elif model_type == "roberta":  # <s> x </s>
            tokenizer.post_processor = tokenizers.processors.RobertaProcessing(
                sep=("</s>", tokenizer.token_to_id("</s>")), cls=("<s>", tokenizer.token_to_id("<s>")))
        else:
            tokenizer.post_processor = tokenizers.processors.ByteLevel(trim_offsets=False)
        path = os.path.join(folder, "tokenizer.json")
        tokenizer.save(path)
        write_config(folder, model_type, tokenizer.get_vocab_size())
        tokenizer.model.save(folder)  # vocab.json + merges.txt, for the slow tokenizers
        return folder, path

    def test_gpt2_byte_level_slow_and_fast(self):
        folder, path = self.byte_level("gpt2", None, "gpt2", ["<|endoftext|>"])
        self.judge("GPT-2 byte-level BPE tokenizer.json (trained), fast", folder,
                   transformers.GPT2TokenizerFast(tokenizer_file=path))
        self.judge("GPT-2 byte-level BPE vocab.json+merges.txt (trained), slow", folder,
                   transformers.GPT2Tokenizer(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")))

    def test_roberta_byte_level_slow_and_fast(self):
        folder, path = self.byte_level("roberta", None, "roberta", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        self.judge("RoBERTa byte-level BPE tokenizer.json (trained, RobertaProcessing), fast", folder,
                   transformers.RobertaTokenizerFast(tokenizer_file=path))
        self.judge("RoBERTa byte-level BPE vocab.json+merges.txt (trained), slow", folder,
                   transformers.RobertaTokenizer(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")))
        # Added tokens' lstrip / rstrip (roberta-base's <mask> has lstrip): the token takes the spaces beside it.
        texts = ["The <mask> sat on the mat.", "Two  <mask>   <mask>\tmasks.", "<mask> first", "an </s>  end", "x</s> y"]
        unflagged = transformers.PreTrainedTokenizerFast(tokenizer_file=path)
        unflagged = [unflagged(text, add_special_tokens=False)["input_ids"] for text in texts]
        expected = self.judge_added_token_flags(folder, path, texts, "<mask> lstrip and </s> rstrip",
                                                lambda content: {"lstrip": content == "<mask>", "rstrip": content == "</s>"})
        self.assertEqual(sum(a != b for a, b in zip(expected, unflagged)), 4)  # the flags change 4 of the 5 texts
        # single_word: <mask> only as a word of its own (not touching a letter, digit, mark or "_").
        texts = ["a<mask>b", "The <mask>, sat.", "<mask>_x and x_<mask>", "é<mask> <mask>.", "<mask><mask> end"]
        expected = self.judge_added_token_flags(folder, path, texts, "<mask> single_word",
                                                lambda content: {"single_word": content == "<mask>"})
        mask = transformers.PreTrainedTokenizerFast(tokenizer_file=path).convert_tokens_to_ids("<mask>")
        self.assertEqual([ids.count(mask) for ids in expected], [0, 1, 0, 1, 2])  # the flag decides

    def judge_added_token_flags(self, folder, path, texts, name, flags):
        """Sets each added token's flags (flags(content) -> {flag: value}) in the folder's tokenizer.json and checks
        rankscope's ids on `texts` against the fast tokenizer read from it; returns transformers' ids."""
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        for token in document["added_tokens"]:
            token.update(flags(token["content"]))
        with open(path, "w", encoding="utf-8") as f:
            json.dump(document, f)
        fast = transformers.PreTrainedTokenizerFast(tokenizer_file=path)
        _, got, _ = rankscope_ids(folder, texts, self.scratch)
        expected = [fast(text, add_special_tokens=False)["input_ids"] for text in texts]
        self.assertEqual(got, expected)
        TABLE.rows.append({"case": f"RoBERTa tokenizer.json, {name}, fast", "hook": f"{len(texts)}/{len(texts)}",
                           "worst_relative_difference": 0.0, "tolerance": 0.0})
        return expected

    def test_gpt_neox_byte_level_multi_space_tokens_fast(self):
        # Pythia's tokenizer.json: GPT-2's byte-level BPE with an NFC normalizer, <|endoftext|> and <|padding|>, and
        # runs of 2 to 24 spaces added as normalized, non-special tokens (code indentation), matched longest first.
        folder, path = self.byte_level("gpt_neox", None, "gpt_neox", ["<|endoftext|>", "<|padding|>"])
        tokenizer = tokenizers.Tokenizer.from_file(path)
        tokenizer.normalizer = tokenizers.normalizers.NFC()
        tokenizer.add_tokens([tokenizers.AddedToken(" " * k, normalized=True) for k in range(24, 1, -1)])
        tokenizer.save(path)
        write_config(folder, "gpt_neox", tokenizer.get_vocab_size())
        spaced = ["def f(x):    return  x", "a" + " " * 30 + "b", "   three before", "after three   ",
                  "tab\t   and  two", "Caf\u0065\u0301 and\u00a0  non-breaking", "<|endoftext|>  <|padding|> x"]
        fast = transformers.GPTNeoXTokenizerFast(tokenizer_file=path)
        self.judge("GPT-NeoX byte-level BPE tokenizer.json (trained, NFC, 23 space-run tokens), fast", folder, fast,
                   sentences=self.sentences + spaced)
        # The space runs are used: 30 spaces are the 24-space token and the 6-space one.
        ids = fast("a" + " " * 30 + "b", add_special_tokens=False)["input_ids"]
        self.assertEqual([fast.convert_ids_to_tokens(i) for i in ids[1:3]], [" " * 24, " " * 6])
        # GPTNeoXTokenizerFast replaces the json's post_processor: <|endoftext|> around each text only with
        # tokenizer_config.json's add_bos_token / add_eos_token (rankscope followed the json: 47/47 lines differed).
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        document["post_processor"] = {"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}}}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(document, f)
        # The last case names its bos_token in special_tokens_map.json alone (a folder saved before transformers 4.34).
        padding = fast.convert_tokens_to_ids("<|padding|>")
        for settings, framing in (({"tokenizer_class": "GPTNeoXTokenizer"}, ([], [])),
                                  ({"add_bos_token": True, "add_eos_token": True}, ([0], [0])),
                                  ({"tokenizer_class": "GPTNeoXTokenizer", "add_eos_token": True}, ([], [0])),
                                  ({"tokenizer_class": "GPTNeoXTokenizer", "add_bos_token": True}, ([padding], []))):
            with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(settings, f)
            if framing[0] == [padding]:
                with open(os.path.join(folder, "special_tokens_map.json"), "w", encoding="utf-8") as f:
                    json.dump({"bos_token": "<|padding|>"}, f)
            reference = transformers.AutoTokenizer.from_pretrained(folder)
            self.assertIsInstance(reference, transformers.GPTNeoXTokenizerFast)
            self.judge(f"GPT-NeoX tokenizer.json with a TemplateProcessing post_processor, tokenizer_config {settings}",
                       folder, reference, sentences=spaced)
            prefix, _, suffix = rankscope_ids(folder, spaced[:1], self.scratch)
            self.assertEqual((prefix, suffix), framing)
        os.remove(os.path.join(folder, "tokenizer_config.json"))
        os.remove(os.path.join(folder, "special_tokens_map.json"))

    def test_llama3_pattern_fast(self):
        pattern = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                   r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
        folder, path = self.byte_level("llama3", pattern, "llama", ["<|begin_of_text|>", "<|end_of_text|>"])
        self.judge("Llama 3 pattern byte-level BPE tokenizer.json (trained), fast", folder,
                   transformers.PreTrainedTokenizerFast(tokenizer_file=path))

    def test_qwen2_pattern_slow_and_fast(self):
        pattern = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                   r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
        folder, path = self.byte_level("qwen2", pattern, "qwen2", ["<|endoftext|>"])
        self.judge("Qwen2 pattern byte-level BPE tokenizer.json (trained, NFC), fast", folder,
                   transformers.PreTrainedTokenizerFast(tokenizer_file=path))
        self.judge("Qwen2 pattern byte-level BPE vocab.json+merges.txt (trained), slow", folder,
                   transformers.Qwen2Tokenizer(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"),
                                               errors="replace"))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
