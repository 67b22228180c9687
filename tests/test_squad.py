"""SQuAD: loading (files, Hugging Face, article split, bad input), windows and span recovery, the official
scores and v2.0's threshold, prediction files, and every kind of mode end to end on a tiny BERT."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from conftest import run_stage_here, shared_data, tiny_export, tracking_store
from pipeline.errors import DataError
from pipeline.finetune.answers import (best_threshold, evaluate, exact_match, f1, normalize_answer,
                                       question_scores, read_predictions)
from pipeline.finetune.spans import best_answers, encode_spans, window_starts
from pipeline.finetune.tasks.base import split_heldout
from pipeline.finetune.tasks.squad import Question, SpanSettings, squad

PASSAGES = [
    # accents, extra whitespace, CJK (split into single characters by BERT's normaliser)
    ("Le Café  Müller opened in 1921 in   Zürich , and Pina Bausch danced there.",
     [("Where did the Café Müller open?", "Zürich"), ("Who danced there?", "Pina Bausch"),
      ("What opened in 1921?", "Café  Müller")]),
    ("The tower 東京タワー stands in Minato ward; it is 333 metres tall.",
     [("What is the tower called?", "東京タワー"), ("How tall is it?", "333 metres")]),
    ("Peter went to Paris in the spring.\nMary stayed in Rome for the   winter months.",
     [("Where did Peter go?", "Paris"), ("How long did Mary stay?", "the   winter months")]),
]


def make_questions(passages=PASSAGES, title="t") -> list[Question]:
    out = []
    for p, (context, qas) in enumerate(passages):
        for k, (question, answer) in enumerate(qas):
            out.append(Question(f"q{p}-{k}", question, context, ((answer, context.index(answer)),),
                                title=f"{title}{p}"))
    return out


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    """A small WordPiece vocabulary trained on the Bible and the passages above."""
    from pipeline.data.corpus import bible_documents
    from pipeline.data.tokenizer import load_tokenizer
    from pipeline.data.wordpiece import train_wordpiece

    folder = tmp_path_factory.mktemp("tok")
    text = [s for d in list(bible_documents())[:100] for s in d.sentences] + [c for c, _ in PASSAGES] * 5
    train_wordpiece(iter(text), folder, vocab_size=400, progress=False)
    return load_tokenizer(folder)


def oracle_logits(encoded) -> dict[int, np.ndarray]:
    """Logits that point at each window's training target: the gold span, or [CLS]."""
    out = {}
    for f in encoded.features:
        lg = np.full((len(f["input_ids"]), 2), -10.0)
        lg[f["start"], 0] = lg[f["end"], 1] = 10.0
        out[f["index"]] = lg
    return out


# ------------------------------------------------------------------------------------------ windows


@pytest.mark.parametrize("max_seq_length, stride", [(128, 128), (48, 8), (40, 6)])
def test_gold_spans_come_back_exactly_from_the_original_passage(tok, max_seq_length, stride):
    """Accents, CJK and runs of spaces: the text cut by character offsets is the gold answer, byte for byte.
    Windows here are at least three answers long: a start is only taken where its window gives it the most
    context, and with windows barely longer than the answer that window may cut the answer's end off."""
    questions = make_questions()
    span = SpanSettings(max_query_length=8, doc_stride=stride, max_answer_length=30, n_best=5)
    enc = encode_spans(tok, questions, max_seq_length, span)
    assert enc.skipped == 0
    texts, odds = best_answers(questions, enc.windows, oracle_logits(enc), span)
    assert texts == {q.id: q.answers[0][0] for q in questions}
    assert all(o < 0 for o in odds.values())  # the span beats [CLS]


def test_windows_cover_every_passage_token_once_as_max_context(tok):
    context = " ".join(f"word{i} of the long passage" for i in range(40))
    q = Question("long", "Which word?", context, (("word33", context.index("word33")),))
    span = SpanSettings(max_query_length=4, doc_stride=16)
    enc = encode_spans(tok, [q], 40, span)
    n = len(tok.encode(context, add_special_tokens=False).ids)
    q_len = min(4, len(tok.encode(q.question, add_special_tokens=False).ids))
    room = 40 - q_len - 3
    assert len(enc.windows) == len(window_starts(n, room, 16)) > 3
    owners = [0] * n
    for s, f, w in zip(window_starts(n, room, 16), enc.features, enc.windows):
        assert len(f["input_ids"]) <= 40 and len(w.offsets) == len(f["input_ids"])
        assert f["token_type_ids"].count(0) == q_len + 2  # [CLS] question [SEP]
        passage = [best for off, best in zip(w.offsets, w.max_context) if off is not None]
        for j, best in enumerate(passage):
            owners[s + j] += best
    assert owners == [1] * n  # every passage token is in some window, the max-context token of exactly one
    hits = [f for f in enc.features if f["start"]]
    assert hits and all(context[enc.windows[f["index"]].offsets[f["start"]][0]:].startswith("word33") for f in hits)


def test_spans_widen_to_whole_words(tok):
    from pipeline.finetune.spans import word_spans

    text = "righteousnesses, unto 東京"
    enc = tok.encode(text, add_special_tokens=False)
    assert len(enc.ids) > 5  # the long word splits into pieces
    assert sorted({text[a:b] for a, b in word_spans(enc)}) == sorted(["righteousnesses", ",", "unto", "東", "京"])


def test_window_starts_step_by_the_stride_and_reach_the_end():
    assert window_starts(10, 20, 5) == [0]
    assert window_starts(100, 40, 25) == [0, 25, 50, 75]     # the last window ends at the passage's end
    assert window_starts(100, 40, 60) == [0, 40, 80]         # a stride wider than a window never skips tokens


def test_a_passage_without_tokens_is_skipped_and_counted(tok):
    qs = [Question("empty", "What?", "   ", (), is_impossible=True), *make_questions()[:1]]
    enc = encode_spans(tok, qs, 64, SpanSettings(max_query_length=8))
    assert enc.skipped == 1 and {w.question for w in enc.windows} == {1}
    enc = encode_spans(tok, qs, 8, SpanSettings(max_query_length=8))  # no room beside the question
    assert enc.skipped == 2 and not enc.features
    context = "An answer of control characters: \x00\x01 here."
    dropped = Question("ctrl", "What?", context, (("\x00\x01", context.index("\x00")),))
    assert encode_spans(tok, [dropped], 64, SpanSettings(), training=True).skipped == 1  # no target to train on
    kept = encode_spans(tok, [dropped], 64, SpanSettings())  # on dev it is still asked, and scored
    assert kept.skipped == 0 and kept.features[0]["start"] == 0


# ------------------------------------------------------------------------------------------ scores


def test_official_normalisation_and_scores():
    assert normalize_answer("The  Cat, an animal!") == "cat animal"
    assert exact_match("the Eiffel Tower.", "Eiffel tower") == 1.0
    assert f1("cat sat on the mat", "the cat sat") == pytest.approx(2 * (2 / 4) * (2 / 2) / (2 / 4 + 2 / 2))
    assert f1("", "cat") == 0.0 and f1("", "") == 1.0 and f1("a the", "") == 1.0  # only articles: empty
    q = Question("q", "?", "Denver Broncos beat Carolina", (("Denver Broncos", 0), ("Broncos", 7)))
    assert question_scores(q, "the Broncos") == (1.0, 1.0)       # the best gold answer counts
    assert question_scores(q, "Broncos beat") == (0.0, pytest.approx(2 / 3))  # F1 1/2 and 2/3: the larger
    none = Question("n", "?", "text", (), is_impossible=True)
    assert question_scores(none, "") == (1.0, 1.0) and question_scores(none, "text") == (0.0, 0.0)


def test_v1_metrics_count_a_missing_prediction_as_wrong():
    qs = make_questions()[:4]
    preds = {qs[0].id: "Zürich", qs[1].id: "Pina", qs[2].id: "the café müller"}
    m, _ = evaluate(qs, preds)
    assert m["exact"] == pytest.approx(2 / 4) and m["f1"] == pytest.approx((1 + 2 / 3 + 1 + 0) / 4)
    assert m["answered"] == 3 and "null_threshold" not in m


def test_v2_threshold_is_the_best_f1_one_and_scores_are_at_it():
    has = [Question(f"h{i}", "?", "alpha beta", (("alpha", 0),)) for i in range(3)]
    no = [Question(f"n{i}", "?", "alpha beta", (), is_impossible=True) for i in range(2)]
    qs = has + no
    preds = {"h0": "alpha", "h1": "alpha", "h2": "beta", "n0": "alpha", "n1": "beta"}
    odds = {"h0": -3.0, "h1": -1.0, "n0": 0.5, "h2": 1.0, "n1": 2.0}
    # answering up to -1.0 gives 2 + 2 (both unanswerable abstain) = 4 of 5, the best
    assert best_threshold(qs, preds, odds) == -1.0
    m, final = evaluate(qs, preds, odds)
    assert m["null_threshold"] == -1.0 and m["exact"] == m["f1"] == pytest.approx(4 / 5)
    assert m["HasAns_exact"] == pytest.approx(2 / 3) and m["NoAns_exact"] == 1.0
    assert final == {"h0": "alpha", "h1": "alpha", "h2": "", "n0": "", "n1": ""}
    # abstaining everywhere wins when every span is wrong: a threshold below every odds
    wrong = {k: "zzz" for k in preds}
    assert best_threshold(qs, wrong, odds) < min(odds.values())
    # equal odds go together: answering both n0 and h2 at 1.0 is no better than at -1.0
    tied = {**odds, "n0": 1.0}
    assert best_threshold(qs, preds, tied) == -1.0


# ------------------------------------------------------------------------------------------ loading


def write_squad(path, passages, version="1.1", impossible=()):
    data = {"version": version, "data": [{"title": f"article {p}", "paragraphs": [{
        "context": context, "qas": [
            {"id": f"q{p}-{k}", "question": question,
             "answers": [] if (p, k) in impossible else [{"text": a, "answer_start": context.index(a)}],
             **({"is_impossible": (p, k) in impossible} if version == "2.0" else {})}
            for k, (question, a) in enumerate(qas)]}]} for p, (context, qas) in enumerate(passages)]}
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_v2_files_with_unanswerable_questions(tmp_path):
    f = write_squad(tmp_path / "v2.json", PASSAGES, "2.0", impossible={(0, 1), (2, 0)})
    task = squad("v2", "2.0", str(f), str(f))
    assert task.metrics[:2] == ["f1", "exact"] and "NoAns_exact" in task.metrics and task.comparable
    by_id = {q.id: q for q in task.dev}
    assert by_id["q0-1"].is_impossible and by_id["q0-1"].answers == () and not by_id["q0-0"].is_impossible
    with pytest.raises(DataError, match=r"v1.json: no question has an 'is_impossible' field.*task=squad"):
        squad("v2", "2.0", str(write_squad(tmp_path / "v1.json", PASSAGES)), None)
    with pytest.raises(DataError, match=r"v2.json: question q0-1 is marked is_impossible"):
        squad("v1", "1.1", str(f), str(f))


@pytest.mark.parametrize("edit, message", [
    (lambda qa: qa.pop("answers"), r"bad.json: question q1-0: no 'answers' field"),
    (lambda qa: qa["answers"][0].update(answer_start=3), r"bad.json: question q1-0: answer_start=3 does not point"),
    (lambda qa: qa.update(answers=[]), r"bad.json: question q1-0: no answer, and not marked is_impossible"),
])
def test_bad_input_names_the_file_and_the_question(tmp_path, edit, message):
    f = write_squad(tmp_path / "bad.json", PASSAGES)
    doc = json.loads(f.read_text(encoding="utf-8"))
    edit(doc["data"][1]["paragraphs"][0]["qas"][0])
    f.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(DataError, match=message):
        squad("bad", "1.1", str(f), None)


def test_a_hugging_face_dataset_folder_loads_like_the_files(tmp_path):
    import datasets

    def rows(questions):
        return [{"id": q.id, "title": q.title, "context": q.context, "question": q.question,
                 "answers": {"text": [t for t, _ in q.answers], "answer_start": [s for _, s in q.answers]}}
                for q in questions]

    qs = make_questions()
    ds = datasets.DatasetDict({"train": datasets.Dataset.from_list(rows(qs)),
                               "validation": datasets.Dataset.from_list(rows(qs[:3]))})
    ds.save_to_disk(str(tmp_path / "squad_copy"))
    task = squad("hf", "1.1", "train", "validation", hf=str(tmp_path / "squad_copy"))
    assert task.train == qs and task.dev == qs[:3]
    split = squad("hf", "1.1", "train", None, hf=str(tmp_path / "squad_copy"), split_fraction=0.34, seed=1)
    assert not split.comparable and {q.title for q in split.train}.isdisjoint({q.title for q in split.dev})
    with pytest.raises(DataError, match=r"squad_copy \[train\]: no question without an answer"):
        squad("hf", "2.0", "train", "validation", hf=str(tmp_path / "squad_copy"))


def test_the_official_dev_set_splits_by_article():
    path = shared_data("squad", "v1.1", "dev-v1.1.json")
    task = squad("squad", "1.1", str(path), None, split_fraction=0.2, seed=3)
    assert len(task.train) + len(task.dev) == 10_570 and not task.comparable
    train_titles, dev_titles = {q.title for q in task.train}, {q.title for q in task.dev}
    assert train_titles.isdisjoint(dev_titles) and len(train_titles) + len(dev_titles) == 48
    assert len(dev_titles) == 10
    assert {q.context for q in task.train}.isdisjoint({q.context for q in task.dev})
    again = squad("squad", "1.1", str(path), None, split_fraction=0.2, seed=3, train_size=100, dev_size=50)
    assert len(again.train) == 100 and {q.title for q in again.dev} <= dev_titles


# ------------------------------------------------------------------------------------------ end to end


def qa_passages(n: int, seed: int):
    """Passages of a simple pattern: who went where, and when."""
    rng = random.Random(seed)
    people, places = ["Peter", "Mary", "John", "Anna", "Simon"], ["Paris", "Berlin", "Rome", "Oslo", "Athens"]
    out = []
    for _ in range(n):
        a, b = rng.sample(people, 2)
        x, y = rng.sample(places, 2)
        context = f"{a} went to {x} in the spring. Later {b} travelled to {y} with friends."
        out.append((context, [(f"Where did {a} go?", x), (f"Who travelled to {y}?", b)]))
    return out


def recipe(**kw):
    from pipeline.finetune.training import Grid, Recipe

    grid = Grid(lrs=(1e-3,), feature_lrs=(1e-3,), poolings=("mean",), tfidf_c=(1.0,), tfidf_ngrams=(2,))
    base = dict(seeds=(0,), epochs=1, feature_epochs=1, batch_size=8, grid=grid, weight_decay=0.01,
                warmup_ratio=0.1, betas=(0.9, 0.999), eps=1e-6, gradient_clip_val=1.0, eval_batch_size=16,
                feature_eval_batch_size=64, eval_every_epoch=False, max_seq_length=64, fused_optimizer=False)
    return Recipe(**{**base, **kw})


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_span_runner_in_every_kind_of_mode(tmp_path, version):
    from pipeline.data.tokenizer import load_tokenizer
    from pipeline.stages.finetune import write_outputs
    from pipeline.architectures import open_export
    from pipeline.finetune.spans import SpanRunner

    export = tiny_export(tmp_path) / "hf"
    impossible = {(p, 1) for p in range(0, 20, 3)} if version == "2.0" else set()
    f = write_squad(tmp_path / "train.json", qa_passages(20, 0), version, impossible)
    d = write_squad(tmp_path / "dev.json", qa_passages(6, 1), version, {(0, 0), (1, 1)} if impossible else set())
    task = split_heldout(squad("tiny", version, str(f), str(d), doc_stride=16, max_query_length=16), 0.5, 0)
    assert len(task.train) == 40 and task.dev and task.test
    runner = SpanRunner(recipe(), task, load_tokenizer(export), open_export(export))
    results = {}
    for mode in ("pretrained", "frozen_last", "tfidf"):
        run = runner.train(mode, runner.candidates(mode)[0], 0, None)
        dev = runner.score(run, "dev")
        results[mode] = (runner.score(run, "test"), dev)
    write_outputs(tmp_path, {}, runner.outputs())  # as the stage writes them
    for mode, (r, dev) in results.items():
        assert set(task.metrics) <= set(r) and all(0 <= r[m] <= 1 for m in task.metrics), mode
        assert r["skipped_train_questions"] == r["skipped_dev_questions"] == r["skipped_test_questions"] == 0
        assert ("null_threshold" in r) == (version == "2.0")
        assert r.get("null_threshold") == dev.get("null_threshold")  # v2.0: test applies the threshold dev chose
        folder = tmp_path / "predictions" / f"{mode}-s0"
        answers, odds = read_predictions(folder)  # the test split's answers
        assert set(answers) == {q.id for q in task.test} and (odds is not None) == (version == "2.0")
        again, _ = evaluate(task.test, answers, odds, r.get("null_threshold"))
        assert {m: again[m] for m in task.metrics} == {m: r[m] for m in task.metrics}, mode  # the files score alike
    assert "loss" in results["pretrained"][0] and results["tfidf"][0]["method"] == "sliding-window word overlap"


def test_the_overlap_baseline_answers_next_to_the_question_s_words():
    from pipeline.finetune.overlap import best_span, idf_table

    context = "Berlin lies in Germany. The capital of France is Paris, on the Seine. Rome is old."
    idf, unseen = idf_table([context, "The river of the city.", "Germany is large."])
    score, text = best_span("What is the capital of France?", context, idf, unseen, window=3, max_words=5)
    assert text == "Paris" and score > 0
    assert best_span("Anything?", "   ", idf, unseen, 3, 5)[1] == ""


@pytest.mark.slow  # a whole stage end to end: the slow marker, which CI runs too
def test_finetune_stage_runs_squad_and_writes_predictions(tmp_path):
    tiny_export(tmp_path)
    f = write_squad(tmp_path / "all.json", qa_passages(30, 0))
    r = run_stage_here("finetune", "task=squad", f"task.data.train={f}", "task.data.dev=null",
                  "task.data.split_fraction=0.3",
                  "task.max_seq_length=64", "task.data.doc_stride=16", "finetune.epochs=1", "finetune.seeds=[0]",
                  "finetune.modes=[pretrained,tfidf]", "finetune.lrs=[1e-3]", "runtime.progress=false",
                  f"tracking.uri={tracking_store(tmp_path)}", f"paths.pretrain={tmp_path / 'pretrain'}",
                  f"paths.metrics={tmp_path / 'metrics'}")
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads((tmp_path / "metrics" / "finetune.json").read_text())
    assert result["task"] == "SQuAD-v1.1" and result["metric"] == "f1" and result["comparable"] is False
    assert result["train_questions"] + result["dev_questions"] + result["test_questions"] == 60
    assert result["train_examples"] >= 40
    assert set(result["modes"]) == {"pretrained", "tfidf"} and all(0 <= m["f1_mean"] <= 1
                                                                    for m in result["modes"].values())
    assert (tmp_path / "metrics" / "predictions" / "pretrained-s0" / "predictions.json").is_file()
    assert (tmp_path / "metrics" / "predictions" / "tfidf-s0" / "predictions.json").is_file()
