"""A trained WordPiece tokenizer as every stage uses it: BERT's special tokens, loading, saving, ids.

A tokenizer folder holds ``vocab.txt`` (one token per line, id = line number),
``tokenizer.json`` (BERT normalisation, pre-tokenisation, WordPiece and the
``[CLS] A [SEP] B [SEP]`` template) and ``tokenizer_config.json``;
``transformers.BertTokenizerFast`` loads it unchanged. Training lives in
``pipeline.data.wordpiece`` (the train_wordpiece stage).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from pipeline.errors import DataError
from pipeline.io import atomic_dir
from pipeline.names import SPECIAL_TOKENS  # ids 0-4 of every vocabulary trained here

PAD, UNK, CLS, SEP, MASK = SPECIAL_TOKENS

def new_tokenizer(lowercase: bool = True, strip_accents: bool | None = None) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token=UNK, max_input_chars_per_word=100))
    # BertNormalizer: clean control chars, pad CJK characters with spaces (the
    # original tokenizer splits them), lowercase and strip accents if uncased.
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def add_bert_template(tok: Tokenizer) -> None:
    cls_id, sep_id = tok.token_to_id(CLS), tok.token_to_id(SEP)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{CLS}:0 $A:0 {SEP}:0",
        pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
        special_tokens=[(CLS, cls_id), (SEP, sep_id)],
    )


def save_tokenizer(tok: Tokenizer, out_dir: str | Path, *, lowercase: bool, strip_accents: bool | None) -> None:
    """Write ``tokenizer.json``, ``vocab.txt`` and ``tokenizer_config.json`` (what ``BertTokenizerFast`` reads)."""
    with atomic_dir(out_dir) as tmp:
        tok.save(str(tmp / "tokenizer.json"))
        with open(tmp / "vocab.txt", "w", encoding="utf-8") as f:
            for token in vocab_list(tok):
                f.write(token + "\n")
        (tmp / "tokenizer_config.json").write_text(json.dumps({
            "tokenizer_class": "BertTokenizer", "do_lower_case": lowercase,
            "strip_accents": strip_accents, "tokenize_chinese_chars": True,
            "unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK,
            "model_max_length": 512}, indent=2) + "\n", encoding="utf-8")


def tokenizer_settings(path: str | Path) -> tuple[bool, bool | None]:
    """(lowercase, strip_accents) of a Hugging Face tokenizer folder (BERT's defaults where unsaid)."""
    f = Path(path) / "tokenizer_config.json"
    conf = json.loads(f.read_text(encoding="utf-8")) if f.exists() else {}
    return bool(conf.get("do_lower_case", True)), conf.get("strip_accents")


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer of a folder: its ``tokenizer.json``, or one built from ``vocab.txt`` (older BERT folders).

    From ``vocab.txt`` the tokenizer is BERT's (normaliser, pre-tokeniser,
    WordPiece, ``[CLS] A [SEP] B [SEP]``), cased or not as ``tokenizer_config.json`` says.
    """
    folder = Path(path)
    f = folder / "tokenizer.json"
    if f.exists():
        return Tokenizer.from_file(str(f))
    vocab_file = folder / "vocab.txt"
    if not vocab_file.exists():
        raise DataError(f"{f}: tokenizer not found, and no vocab.txt beside it "
                        "(run the train_wordpiece stage first, or give a BERT folder)")
    vocab = {t: i for i, t in enumerate(vocab_file.read_text(encoding="utf-8").split("\n")[:-1])}
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise DataError(f"{vocab_file}: lacks the special tokens {', '.join(missing)}")
    lowercase, strip_accents = tokenizer_settings(folder)
    tok = new_tokenizer(lowercase, strip_accents)
    tok.model = models.WordPiece(vocab, unk_token=UNK, max_input_chars_per_word=100)
    add_bert_template(tok)
    return tok


def vocab_list(tok: Tokenizer) -> list[str]:
    """Tokens in id order (the lines of vocab.txt)."""
    return [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]


def special_ids(tok: Tokenizer) -> dict[str, int]:
    return {t.strip("[]").lower(): tok.token_to_id(t) for t in SPECIAL_TOKENS}


def encode_documents(tok: Tokenizer, documents: Iterable[list[str]], batch: int = 1000) -> Iterator[list[list[int]]]:
    """WordPiece ids of each sentence of each document, without special tokens."""
    for doc in documents:
        ids: list[list[int]] = []
        for i in range(0, len(doc), batch):
            ids.extend(e.ids for e in tok.encode_batch(doc[i:i + batch], add_special_tokens=False))
        yield [s for s in ids if s]
