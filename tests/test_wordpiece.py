"""train_wordpiece: the output loads unchanged in transformers and gives the same ids."""
from __future__ import annotations

import itertools
import json

import pytest

from conftest import original_ids, vocab_txt_pair
from pipeline.data.corpus import bible_documents
from pipeline.data.tokenizer import load_tokenizer
from pipeline.data.wordpiece import train_wordpiece
from pipeline.names import SPECIAL_TOKENS


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
    from pipeline.model.bert import BertForPreTraining
    from pipeline.model_config import BertConfig
    from pipeline.model.hf import save_hf

    docs = list(itertools.islice(bible_documents(), 50))
    train_wordpiece((s for d in docs for s in d.sentences), tmp_path / "tok", vocab_size=300, lowercase=False,
                    progress=False)
    model = BertForPreTraining(BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=64, max_position_embeddings=64))
    save_hf(model, tmp_path / "hf", tokenizer_dir=tmp_path / "tok")
    config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert config["do_lower_case"] is False and config["model_max_length"] == 64


@pytest.mark.parametrize("lowercase", [True, False])
def test_a_vocab_txt_folder_loads_as_the_original_tokenizer(tokenizer_dir, tmp_path, wikitext, lowercase):
    """Older BERT folders carry only vocab.txt: built from it, the tokenizer matches the pure-Python original."""
    tok, slow = vocab_txt_pair(tokenizer_dir / "vocab.txt", tmp_path / "bert", lowercase)
    lines = [line for line in wikitext.text.read_text(encoding="utf-8").splitlines() if line][:1500]
    lines += ["Crème brûlée at the Café, 東京 and ＦＵＬＬ width!"]
    for line in lines:
        assert tok.encode(line, add_special_tokens=False).ids == original_ids(slow, line), line


def test_the_tokenizer_stage_can_take_a_published_vocabulary(tokenizer_dir, tmp_path):
    from pipeline.config import compose, validate
    from stages.train_wordpiece import run

    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "vocab.txt").write_bytes((tokenizer_dir / "vocab.txt").read_bytes())
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "valid.txt").write_text("In the beginning God created the heaven .\n", encoding="utf-8")
    cfg = compose([f"tokenizer.from_folder={folder}", f"paths.corpus={tmp_path / 'corpus'}",
                   f"paths.tokenizer={tmp_path / 'out'}", f"paths.metrics={tmp_path / 'metrics'}"])
    stats = run(validate(cfg))
    assert stats["vocab_size"] == len((folder / "vocab.txt").read_text(encoding="utf-8").split("\n")) - 1
    assert (tmp_path / "out" / "vocab.txt").read_bytes() == (folder / "vocab.txt").read_bytes()
    text = "And the earth was without form, and void."
    assert load_tokenizer(tmp_path / "out").encode(text).ids == load_tokenizer(folder).encode(text).ids


def test_training_gives_the_same_bytes_every_time(tmp_path):
    """``tokenizers`` alone numbers ``##`` pieces in hash-map order; ours pins the order (same files each run)."""
    docs = list(itertools.islice(bible_documents(), 0, 1189, 7))
    sentences = [s for d in docs for s in d.sentences] + ["Ünïcödé, 中文字符, ﬁ ligature, tab\there."]
    for run in range(4):  # each run builds fresh hash maps with fresh random seeds
        train_wordpiece(sentences, tmp_path / str(run), vocab_size=1500, limit_alphabet=40, progress=False)
    for name in ("vocab.txt", "tokenizer.json"):
        assert len({(tmp_path / str(run) / name).read_bytes() for run in range(4)}) == 1, name


def test_continuation_pieces_are_ordinary_vocabulary(tokenizer_dir):
    """They are registered as special tokens only while training: text spelling one is tokenized as text."""
    tok = load_tokenizer(tokenizer_dir)
    added = json.loads((tokenizer_dir / "tokenizer.json").read_text())["added_tokens"]
    assert [t["content"] for t in added] == list(SPECIAL_TOKENS)
    assert tok.token_to_id("##e") is not None
    assert tok.encode("he ##e", add_special_tokens=False).tokens == ["he", "[UNK]", "[UNK]", "e"]
