"""NER: CoNLL reading (IOB1 and IOB2), first-piece labels, entity F1, and the finetune stage in every mode."""
from __future__ import annotations

import json
import random

import pytest
import torch

from conftest import run_stage_here, tiny_export
from pipeline.errors import DataError
from pipeline.finetune.tasks.conll import conll, read_conll, to_iob2

IOB1 = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
. . O O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER
met VBD B-VP O
John NNP B-NP I-PER
Smith NNP I-NP I-PER
Mary NNP I-NP B-PER
"""


def test_iob1_is_converted_to_iob2():
    assert to_iob2(["I-PER", "I-PER", "O", "I-ORG", "B-ORG", "I-ORG", "I-LOC"]) == \
        ["B-PER", "I-PER", "O", "B-ORG", "B-ORG", "I-ORG", "B-LOC"]


def test_conll_files_read_in_both_schemes(tmp_path):
    f = tmp_path / "train.txt"
    f.write_text(IOB1, encoding="utf-8")
    sents = read_conll(f)
    assert [len(w) for w, _ in sents] == [5, 6] and sents[0][1][0] == "I-ORG"
    task = conll("ner", str(f), str(f), scheme="iob1")
    assert task.labels == ["O", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    names = [[task.labels[t] for t in s.tags] for s in task.train]
    assert names[1] == ["B-PER", "I-PER", "O", "B-PER", "I-PER", "B-PER"]  # B- kept where IOB1 needs it
    iob2 = tmp_path / "iob2.txt"
    iob2.write_text("\n\n".join("\n".join(f"{w} {t}" for w, t in zip(s.words, n)) for s, n in zip(task.train, names)),
                    encoding="utf-8")
    again = conll("ner", str(iob2), str(iob2), scheme="iob2")
    assert [s.tags for s in again.train] == [s.tags for s in task.train]


@pytest.mark.parametrize("text, message", [
    ("EU\n", r"c.txt:1: 'EU' has 1 column"),
    ("EU X-ORG\n", r"c.txt:1: tag 'X-ORG' is not O, B-<type> or I-<type>"),
    ("\n-DOCSTART- O\n\n", "no sentences"),
])
def test_bad_conll_files_are_named(tmp_path, text, message):
    f = tmp_path / "c.txt"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_conll(f)


def test_an_entity_type_missing_from_train_is_refused(tmp_path):
    (tmp_path / "t.txt").write_text("EU B-ORG\n", encoding="utf-8")
    (tmp_path / "d.txt").write_text("Paris B-LOC\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"d.txt: tag 'B-LOC' does not occur in the train split"):
        conll("ner", str(tmp_path / "t.txt"), str(tmp_path / "d.txt"), scheme="iob2")


def test_words_are_labelled_on_their_first_piece(tmp_path):
    from pipeline.finetune.tokens import encode_ner
    from pipeline.names import IGNORE_INDEX
    from pipeline.finetune.tasks.conll import Sentence
    from pipeline.data.tokenizer import load_tokenizer
    from pipeline.data.wordpiece import train_wordpiece

    from pipeline.data.corpus import bible_documents

    docs = list(bible_documents())[:50]
    train_wordpiece((x for d in docs for x in d.sentences), tmp_path / "tok", vocab_size=300, progress=False)
    tok = load_tokenizer(tmp_path / "tok")
    s = Sentence(("righteousnesses", "cat", "sat"), (1, 0, 2))
    enc = encode_ner(tok, [s], 64)[0]
    pieces = tok.encode(["righteousnesses", "cat", "sat"], is_pretokenized=True, add_special_tokens=True)
    assert len(pieces.ids) > 5  # the long word splits into several pieces
    first = [i for i, w in enumerate(pieces.word_ids) if w is not None and (i == 0 or pieces.word_ids[i - 1] != w)]
    assert [enc["labels"][i] for i in first] == [1, 0, 2]
    assert sum(x != IGNORE_INDEX for x in enc["labels"]) == 3


def test_entity_scores_are_seqeval_f1():
    from pipeline.finetune.tokens import entity_scores

    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    pred = [["B-PER", "I-PER", "O", "O"]]
    got = entity_scores(gold, pred)
    assert got["precision"] == 1.0 and got["recall"] == 0.5 and got["f1"] == pytest.approx(2 / 3, abs=1e-6)


def test_token_classifier_matches_hugging_face():
    import transformers

    from pipeline.model.bert import BertForTokenClassification
    from pipeline.model.hf import load_hf

    torch.manual_seed(0)
    hf = transformers.BertForTokenClassification(transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        num_labels=5, attn_implementation="sdpa")).eval()
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        hf.save_pretrained(d)
        ours = load_hf(d, BertForTokenClassification, num_labels=5)
    ids = torch.randint(5, 99, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, None, mask), hf(input_ids=ids, attention_mask=mask).logits,
                                   atol=1e-5, rtol=1e-5)


def _synthetic_conll(path, n, seed):
    rng = random.Random(seed)
    people, places = ["Peter", "Mary", "John", "Anna"], ["Paris", "Berlin", "Rome", "Oslo"]
    lines = []
    for _ in range(n):
        p, q = rng.choice(people), rng.choice(places)
        for w, t in [(p, "I-PER"), ("went", "O"), ("to", "O"), (q, "I-LOC"), (".", "O")]:
            lines.append(f"{w} {t}")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


@pytest.mark.slow  # a whole stage end to end: the slow marker, which CI runs too
def test_finetune_stage_runs_ner_in_every_mode(tmp_path):
    from pipeline.names import MODES

    tiny_export(tmp_path)
    _synthetic_conll(tmp_path / "train.txt", 80, 0)
    _synthetic_conll(tmp_path / "dev.txt", 20, 1)
    r = run_stage_here("finetune", "task=conll2003", f"task.data.train={tmp_path / 'train.txt'}",
                       f"task.data.dev={tmp_path / 'dev.txt'}", "finetune.epochs=3", "finetune.seeds=[0]",
                  f"finetune.modes=[{','.join(MODES)}]",
                  "finetune.lrs=[3e-3]", "finetune.feature_lrs=[3e-3]", "runtime.progress=false", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                  f"paths.pretrain={tmp_path / 'pretrain'}", f"paths.metrics={tmp_path / 'metrics'}")
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads((tmp_path / "metrics" / "finetune.json").read_text())
    assert result["task"] == "CoNLL-2003" and result["metric"] == "f1" and set(result["modes"]) == set(MODES)
    assert all(0 <= m["f1_mean"] <= 1 for m in result["modes"].values())
    # Names and places are easy to tell apart by their words: the linear baseline and fine-tuning find them.
    assert result["modes"]["tfidf"]["f1_mean"] > 0.9 and result["modes"]["pretrained"]["f1_mean"] > 0.5
