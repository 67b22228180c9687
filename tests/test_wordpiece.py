"""train_wordpiece: the output loads unchanged in transformers and gives the same ids."""
from __future__ import annotations

import itertools
import json

import pytest

from pipeline.config import SPECIAL_TOKENS
from pipeline.corpus import bible_documents
from pipeline.wordpiece import load_tokenizer, train_wordpiece


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok") / "tokenizer"
    docs = list(itertools.islice(bible_documents(), 0, 1189, 3))
    train_wordpiece((s for d in docs for s in d.sentences), out, vocab_size=2000, progress=False)
    return out


def test_vocab_file_starts_with_special_tokens(tokenizer_dir):
    vocab = (tokenizer_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert vocab[:5] == list(SPECIAL_TOKENS)
    assert len(vocab) == 2000 and len(set(vocab)) == 2000
    assert any(v.startswith("##") for v in vocab)


def test_bert_tokenizer_fast_loads_it_and_agrees(tokenizer_dir):
    transformers = pytest.importorskip("transformers")
    ours = load_tokenizer(tokenizer_dir)
    hf = transformers.BertTokenizerFast.from_pretrained(str(tokenizer_dir))
    # transformers 5 keeps the pure-Python port of the original tokenizer as BertTokenizerLegacy.
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    slow = BertTokenizerLegacy(vocab_file=str(tokenizer_dir / "vocab.txt"), do_lower_case=True)
    sample = [s for d in itertools.islice(bible_documents(), 1, 200, 7) for s in d.sentences[:3]]
    sample += ["Ünïcödé ACCENTS, and 中文字符 mixed in!", "tabs\tand  spaces\u00a0odd"]
    for a, b in zip(sample[::2], sample[1::2]):
        expected = ours.encode(a, b)
        for t in (hf, slow):
            enc = t(a, b, return_token_type_ids=True)
            assert enc["input_ids"] == expected.ids, (t, a, b)
            assert enc["token_type_ids"] == expected.type_ids


def test_pair_template_is_cls_a_sep_b_sep(tokenizer_dir):
    tok = load_tokenizer(tokenizer_dir)
    enc = tok.encode("in the beginning", "and the earth")
    assert enc.tokens[0] == "[CLS]" and enc.tokens.count("[SEP]") == 2 and enc.tokens[-1] == "[SEP]"
    first_sep = enc.tokens.index("[SEP]")
    assert enc.type_ids == [0] * (first_sep + 1) + [1] * (len(enc.ids) - first_sep - 1)


def test_cased_vocabulary_stays_cased_in_the_model_export(tmp_path):
    from pipeline.model import BertConfig, BertForPreTraining, save_hf

    docs = list(itertools.islice(bible_documents(), 50))
    train_wordpiece((s for d in docs for s in d.sentences), tmp_path / "tok", vocab_size=300, lowercase=False,
                    progress=False)
    model = BertForPreTraining(BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=64, max_position_embeddings=64))
    save_hf(model, tmp_path / "hf", tokenizer_dir=tmp_path / "tok")
    config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert config["do_lower_case"] is False and config["model_max_length"] == 64
