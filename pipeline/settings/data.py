"""The data groups' settings: the corpus, its tokenizer, the pretraining examples (pairs), their masking, and
the fixed evaluation set (eval_set) with its layout probe."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import ConfigError
from pipeline.names import FORMATS, SPECIAL_TOKENS
from pipeline.settings.base import WORDS, Settings, group, setting
from pipeline.values import (BOOL, MAPPING, NON_NEGATIVE_INT, POSITIVE_INT, PROBABILITY, TEXT, distinct, integer,
                             list_of, number, one_of)


@dataclass(frozen=True, kw_only=True)
class ProbeWords(Settings):
    KEY = "corpus.probe"
    words: tuple[str, ...] = setting(list_of(TEXT, "a non-empty list of words"))
    senses: tuple[str, ...] = setting(WORDS)
    most_frequent: int = setting(NON_NEGATIVE_INT)  # and the corpus's N most frequent words beside them


@dataclass(frozen=True, kw_only=True)
class CorpusSettings(Settings):
    KEY = "corpus"
    name: str = setting(TEXT)
    valid_fraction: float = setting(number(0, 1, low_open=True, high_open=True))
    source: dict = setting(MAPPING.saying("a mapping with the documents' _target_"))
    probe: ProbeWords = group(ProbeWords)

    def check(self, key: str) -> None:
        TEXT.check(f"{key}.source._target_", self.source.get("_target_"))


@dataclass(frozen=True, kw_only=True)
class TokenizerSettings(Settings):
    KEY = "tokenizer"
    vocab_size: int = setting(integer(len(SPECIAL_TOKENS) + 27, expected=(
        f"an integer large enough for the {len(SPECIAL_TOKENS)} special tokens and an alphabet "
        f"(> {len(SPECIAL_TOKENS) + 26})")))
    min_frequency: int = setting(integer(1))
    limit_alphabet: int = setting(POSITIVE_INT)
    lowercase: bool = setting(BOOL)
    strip_accents: bool | None = setting(BOOL.or_null(" (follow tokenizer.lowercase)"))
    from_folder: str | None = setting(TEXT.or_null(" (train a vocabulary)"))


@dataclass(frozen=True, kw_only=True)
class PairsSettings(Settings):
    KEY = "pairs"
    format: str = setting(one_of(FORMATS))
    max_seq_length: int = setting(integer(5, expected="an integer >= 5 ([CLS], two [SEP] and at least one token "
                                                      "of A and of B)"))
    short_seq_prob: float = setting(PROBABILITY)
    dupe_factor: int = setting(integer(1))
    shard_tokens: int = setting(integer(1))


@dataclass(frozen=True, kw_only=True)
class Corruption(Settings):
    """What a position chosen for prediction becomes: ``[MASK]``, a random piece, or itself (shares of 1)."""
    mask_token_prob: float = setting(PROBABILITY)
    random_token_prob: float = setting(PROBABILITY)
    keep_prob: float = setting(PROBABILITY)

    def check(self, key: str) -> None:
        total = self.mask_token_prob + self.random_token_prob + self.keep_prob
        if abs(total - 1) > 1e-6:
            raise ConfigError(
                f"{key}.mask_token_prob + random_token_prob + keep_prob = {total:g} is not allowed: expected 1 "
                f"(got {self.mask_token_prob}, {self.random_token_prob}, {self.keep_prob})")


@dataclass(frozen=True, kw_only=True)
class MaskingSettings(Corruption):
    KEY = "masking"
    mlm_probability: float = setting(number(0, 1, low_open=True, high_open=True,
                                            expected="a probability in (0, 1)"))
    max_predictions_per_seq: int | None = setting(integer(1).or_null(" (optional: no cap beyond the ratio)"))
    whole_word: bool = setting(BOOL)
    static: bool = setting(BOOL)


@dataclass(frozen=True, kw_only=True)
class LayoutSettings(Settings):
    """The layout probe (``pipeline.data.layout``): single segments of each length, and natural sentence pairs."""
    KEY = "eval_set.layout"
    lengths: tuple[int, ...] = setting(list_of(integer(4), "a non-empty list of lengths >= 4 ([CLS], two pieces, "
                                                          "[SEP])"))
    rows: int = setting(POSITIVE_INT)
    along_rows: int = setting(NON_NEGATIVE_INT)

    def check(self, key: str) -> None:
        distinct("lengths (each is a cell of the probe)").check(f"{key}.lengths", self.lengths)
        if self.along_rows > self.rows:
            raise ConfigError(f"{key}.along_rows={self.along_rows} is not allowed: expected at most {key}.rows="
                              f"{self.rows} (the rows along pretraining are the first of each cell)")


@dataclass(frozen=True, kw_only=True)
class EvalSetSettings(Corruption):
    KEY = "eval_set"
    max_seq_length: int = setting(integer(5, expected="an integer >= 5 ([CLS], two [SEP] and a piece of A and of "
                                                      "B)"))
    short_seq_prob: float = setting(PROBABILITY)
    mlm_probability: float = setting(number(0, 1, low_open=True, high_open=True, expected="a share in (0, 1)"))
    max_sequences: int | None = setting(POSITIVE_INT.or_null(" (optional: all valid examples)"))
    layout: LayoutSettings = group(LayoutSettings)

    def check(self, key: str) -> None:
        super().check(key)
        number(0, low_open=True, expected="more than 0 (the headline scores the positions shown as [MASK])").check(
            f"{key}.mask_token_prob", self.mask_token_prob)
