"""The fine-tuning protocol: choices made on dev before test is read, held-out splits by group, the word-order
control, the reading task, poolings and the from-scratch start."""
from __future__ import annotations

import dataclasses
import math
import random
import re
from collections import Counter

import numpy as np
import pytest
import torch

from pipeline.data.datamodule import LengthGroupedBatches
from pipeline.errors import DataError
from pipeline.finetune.protocol import Choice, choose, run_mode, step_past
from pipeline.finetune.sentence import classical
from pipeline.finetune.tasks.base import Example, TaskData, shuffled_words, split_heldout
from pipeline.finetune.tasks.bible import distinct_words, swap_words, verse_next, word_order
from pipeline.finetune.training import Grid, Recipe, Runner, Trained
from pipeline.model.bert import BertConfig, BertForSequenceClassification

GRID = Grid(lrs=(1e-3,), feature_lrs=(1e-3,), poolings=("token", "mean"), tfidf_c=(1e-4, 100.0), tfidf_ngrams=(1,))
RECIPE = Recipe(seeds=(0, 1), epochs=1, feature_epochs=1, batch_size=8, grid=GRID, weight_decay=0.0,
                warmup_ratio=0.0, betas=(0.9, 0.999), eps=1e-8, gradient_clip_val=1.0, eval_batch_size=8,
                feature_eval_batch_size=8, eval_every_epoch=False, max_seq_length=16)


class TfidfRunner(Runner):
    """The sentence runner's classical arm alone (no network): the protocol's bookkeeping on a real model."""
    kind = "sentence"

    def __init__(self, task: TaskData):
        super().__init__(RECIPE, task, export=None)
        self.read: list[str] = []  # every split a run was scored on, in order

    def classical_candidates(self):
        return [{"ngrams": n, "c": c} for n in GRID.tfidf_ngrams for c in GRID.tfidf_c]

    def classical(self, settings):
        return classical(self.task, settings["ngrams"], settings["c"])

    def score(self, run, split):
        self.read.append(split)
        return super().score(run, split)


def _sentiment(n: int, rng: random.Random, flip: bool = False) -> list[Example]:
    out = []
    for _ in range(n):
        label = rng.randint(0, 1)
        words = rng.sample([f"w{i}" for i in range(40)], 5) + ["good" if label else "bad"]
        rng.shuffle(words)
        out.append(Example(" ".join(words), None, 1 - label if flip else label))
    return out


def test_the_choice_is_made_on_dev_and_test_is_read_only_after_it():
    """Test's labels are flipped: had the choice read them, it would take the weakest model (C = 1e-4, always the
    same label), which scores best on a flipped test. It takes the best on dev, and reads test once, last."""
    rng = random.Random(0)
    task = TaskData("sentiment", ["bad", "good"], _sentiment(300, rng), _sentiment(100, rng))
    task.test = _sentiment(100, rng, flip=True)
    runner = TfidfRunner(task)
    opened = []
    choice, winner = choose(runner, "tfidf", 0, lambda m, s, tags: opened.append(tags) or None, by="baseline")
    assert runner.read == ["dev", "dev"] and choice.settings == {"ngrams": 1, "c": 100.0}
    assert [g["dev"]["accuracy"] > 0.95 for g in choice.grid] == [False, True]
    runs = run_mode(runner, "tfidf", (0, 1), choice, lambda m, s, tags: None, winner)
    assert runner.read == ["dev", "dev", "test"]  # the winner's dev score is reused, test read once
    assert len(runs) == 1 and runs[0]["accuracy"] < 0.05 and runs[0]["dev"]["accuracy"] > 0.95
    assert [t["candidate"] for t in opened] == ["0", "1"]  # one MLflow run per candidate


def test_an_inherited_choice_trains_every_seed_at_it_and_scores_dev_then_test():
    rng = random.Random(1)
    task = TaskData("sentiment", ["bad", "good"], _sentiment(200, rng), _sentiment(50, rng))
    task.test = _sentiment(50, rng)
    runner = TfidfRunner(task)
    runs = run_mode(runner, "tfidf", (0, 1), Choice({"ngrams": 1, "c": 100.0}, by="baseline"), lambda *a: None)
    assert runner.read == ["dev", "test"] and runs[0]["accuracy"] > 0.9


def test_candidates_cross_learning_rates_with_poolings():
    class Sentence(Runner):
        kind = "sentence"

        def poolings(self):
            return ["token", "mean"]

    runner = Sentence(RECIPE, task=None, export=None)
    assert runner.candidates("pretrained") == [{"lr": 1e-3, "pooling": "token"}, {"lr": 1e-3, "pooling": "mean"}]
    assert runner.candidates("tfidf") == [{}]  # a kind without a classical grid: nothing to choose


EDGES = Grid(lrs=(3e-4, 1e-3, 3e-3), feature_lrs=(1e-3, 3e-3, 1e-2), poolings=("token", "mean"), tfidf_c=(1.0,),
             tfidf_ngrams=(1,), lr_bounds=(1e-5, 1e-1))


@pytest.fixture(autouse=True)
def no_heap_trim(monkeypatch):
    """The protocol hands the heap back after every candidate (``memory.release``: a full garbage collection), which
    in a test process full of objects costs most of a second a call and changes nothing these tests read."""
    monkeypatch.setattr("pipeline.finetune.protocol.release", lambda: None)


class PeakRunner(Runner):
    """Dev scores without a network: a peak at learning rate ``peak`` (falling with the distance in log rate),
    the mean pooling a little ahead. Every run it trains is kept, in order."""
    kind = "sentence"

    def __init__(self, peak: float, grid: Grid = EDGES):
        super().__init__(dataclasses.replace(RECIPE, grid=grid), TaskData("t", ["a", "b"], [], []), export=None)
        self.peak, self.trained = peak, []

    def poolings(self):
        return ["token", "mean"]

    def train(self, mode, settings, seed, logger):
        self.trained.append(settings)
        score = -abs(math.log(settings["lr"] / self.peak)) + (0.1 if settings["pooling"] == "mean" else 0.0)
        return Trained(mode, settings, seed, scorer=lambda split: {"accuracy": score}, logger=logger)


def _choose(runner: PeakRunner, mode: str = "pretrained") -> tuple[Choice, list[dict]]:
    opened = []
    choice, _ = choose(runner, mode, 0, lambda m, s, tags: opened.append(tags) or None, by="baseline")
    return choice, opened


def test_a_rate_chosen_on_the_grid_s_edge_extends_the_grid_past_it_until_the_choice_is_inside():
    """The best rate is 9e-5, one step below the grid (3e-4 over its ratio 10/3 there): the grid's six candidates,
    then 9e-5 at the winning pooling, which wins on the edge again, then 2.7e-5, which loses: 9e-5 is inside."""
    runner = PeakRunner(peak=9e-5)
    choice, opened = _choose(runner)
    assert runner.trained[6:] == [{"lr": 9e-5, "pooling": "mean"}, {"lr": 2.7e-5, "pooling": "mean"}]
    assert len(runner.trained) == 8 and choice.settings == {"lr": 9e-5, "pooling": "mean"}
    assert choice.extended == [{"edge": "lowest", "lr": 9e-5}, {"edge": "lowest", "lr": 2.7e-5}]
    assert choice.at_limit is None and [g["lr"] for g in choice.grid[6:]] == [9e-5, 2.7e-5]
    assert [t.get("extended") for t in opened] == [None] * 6 + ["lowest", "lowest"]
    assert [t["candidate"] for t in opened] == [str(i) for i in range(8)]
    as_json = choice.as_json()
    assert as_json["extended"] == choice.extended and as_json["at_limit"] is None and len(as_json["grid"]) == 8


def test_a_rate_chosen_inside_the_grid_trains_the_grid_alone():
    runner = PeakRunner(peak=1e-3)
    choice, _ = _choose(runner)
    assert len(runner.trained) == 6 and choice.settings == {"lr": 1e-3, "pooling": "mean"}
    assert choice.extended == [] and choice.at_limit is None


def test_the_heads_on_frozen_features_extend_their_own_grid_upward():
    """A frozen head's grid is finetune.feature_lrs: from 1e-2 by its ratio 10/3 to 3.3e-2, which wins; the next
    step (1.1e-1) would cross the bound 1e-1 and lands on it, and loses."""
    runner = PeakRunner(peak=4e-2)
    choice, _ = _choose(runner, "frozen_weighted")
    assert [s["lr"] for s in runner.trained] == [1e-3, 3e-3, 1e-2] * 2 + [3.3e-2, 1e-1]
    assert choice.settings["lr"] == 3.3e-2 and choice.at_limit is None
    assert choice.extended == [{"edge": "highest", "lr": 3.3e-2}, {"edge": "highest", "lr": 1e-1}]


def test_the_stated_bound_stops_the_extension_and_the_choice_says_so():
    """The best lies far below every rate allowed: the grid steps down to 9e-5 and 2.7e-5, the next step (8.1e-6)
    lands on the bound 2e-5, which wins too: the choice is at the limit, and nothing past it is trained."""
    runner = PeakRunner(peak=1e-7, grid=dataclasses.replace(EDGES, lr_bounds=(2e-5, 1e-1)))
    choice, _ = _choose(runner)
    assert [s["lr"] for s in runner.trained[6:]] == [9e-5, 2.7e-5, 2e-5]
    assert choice.settings == {"lr": 2e-5, "pooling": "mean"} and choice.at_limit == "lowest"
    assert choice.as_json()["at_limit"] == "lowest"


def test_a_bound_on_the_grid_s_own_edge_or_no_bounds_trains_the_grid_as_given():
    at_edge = PeakRunner(peak=1e-7, grid=dataclasses.replace(EDGES, lr_bounds=(3e-4, 1e-1)))
    choice, _ = _choose(at_edge)
    assert len(at_edge.trained) == 6 and choice.extended == [] and choice.at_limit == "lowest"
    unbounded = PeakRunner(peak=1e-7, grid=dataclasses.replace(EDGES, lr_bounds=None))
    choice, _ = _choose(unbounded)
    assert len(unbounded.trained) == 6 and choice.extended == [] and choice.at_limit is None


def test_the_report_names_an_extended_grid_and_a_choice_on_the_limit_and_warns_older_runs_of_the_edge():
    from pipeline.report.sections.choices import edge_text

    extended, _ = _choose(PeakRunner(peak=9e-5))
    assert edge_text(extended.as_json()) == " (extended below the grid to lr 2.7e-5; interior)"
    limited, _ = _choose(PeakRunner(peak=1e-7, grid=dataclasses.replace(EDGES, lr_bounds=(2e-5, 1e-1))))
    assert edge_text(limited.as_json()) == " (at the stated limit lr 2e-5)"
    inside, _ = _choose(PeakRunner(peak=1e-3))
    assert edge_text(inside.as_json()) == ""
    older = {k: v for k, v in limited.as_json().items() if k not in ("extended", "at_limit")}
    assert edge_text(older) == " (the grid's lowest rate)"


class PeakTfidf(Runner):
    """The classical arm's dev scores without a model: a peak at C ``peak`` (falling with the distance in log C),
    bigrams a little ahead. Every C it fits is kept, in order."""
    kind = "sentence"

    def __init__(self, peak: float, c_bounds: tuple[float, float] | None = (1e-3, 1e4)):
        grid = dataclasses.replace(EDGES, tfidf_c=(0.1, 1.0, 10.0, 100.0), tfidf_ngrams=(1, 2), c_bounds=c_bounds)
        super().__init__(dataclasses.replace(RECIPE, grid=grid), TaskData("t", ["a", "b"], [], []), export=None)
        self.peak, self.fitted = peak, []

    def classical_candidates(self):
        g = self.recipe.grid
        return [{"ngrams": n, "c": c} for n in g.tfidf_ngrams for c in g.tfidf_c]

    def train(self, mode, settings, seed, logger):
        self.fitted.append(settings)
        score = -abs(math.log(settings["c"] / self.peak)) + (0.1 if settings["ngrams"] == 2 else 0.0)
        return Trained(mode, settings, seed, scorer=lambda split: {"accuracy": score}, logger=logger)


def test_tfidf_s_c_chosen_on_the_grid_s_top_extends_the_grid_at_its_n_grams_until_inside():
    """The best C is 500: the grid's 8 candidates choose C 100 with bigrams, its top; one step up by the grid's
    ratio there (10) fits C 1000, which wins, then 1e4, which loses: 1000 is inside, and the report says so."""
    from pipeline.report.sections.choices import edge_text

    runner = PeakTfidf(peak=500.0)
    choice, _ = _choose(runner, "tfidf")
    assert runner.fitted[8:] == [{"ngrams": 2, "c": 1000.0}, {"ngrams": 2, "c": 10000.0}]
    assert choice.settings == {"ngrams": 2, "c": 1000.0} and choice.at_limit is None
    assert choice.extended == [{"edge": "highest", "c": 1000.0}, {"edge": "highest", "c": 10000.0}]
    assert edge_text(choice.as_json()) == " (extended above the grid to C 10000; interior)"


def test_tfidf_s_c_bound_stops_the_extension_and_the_choice_says_so():
    """With c_bounds up to 300 the step from 100 lands on 300, which wins and sits on the bound: nothing past it."""
    from pipeline.report.sections.choices import edge_text

    runner = PeakTfidf(peak=1e5, c_bounds=(1e-3, 300.0))
    choice, _ = _choose(runner, "tfidf")
    assert [s["c"] for s in runner.fitted[8:]] == [300.0]
    assert choice.settings == {"ngrams": 2, "c": 300.0} and choice.at_limit == "highest"
    assert edge_text(choice.as_json()) == " (at the stated limit C 300)"
    inside = PeakTfidf(peak=3.0)
    choice, _ = _choose(inside, "tfidf")
    assert len(inside.fitted) == 8 and choice.extended == [] and choice.settings == {"ngrams": 2, "c": 1.0}


@pytest.mark.parametrize("rates, lr, step", [
    ([3e-4, 1e-3, 3e-3], 3e-3, ("highest", 9e-3)),     # 0.009000000000000001 unrounded
    ([3e-4, 1e-3, 3e-3], 3e-4, ("lowest", 9e-5)),
    ([3e-4, 1e-3, 3e-3], 1e-3, None),
    ([1e-3], 1e-3, None),                              # one rate: no ratio to step by
    ([1.05e-5, 3e-5], 1.05e-5, ("lowest", 1.04e-5)),   # the bound itself, never rounded past it
    ([1.04e-5, 3e-5], 1.04e-5, ("lowest", None)),
])
def test_one_step_past_an_edge_is_the_edge_s_own_ratio_and_stops_on_the_bound(rates, lr, step):
    assert step_past(rates, lr, (1.04e-5, 1e-1)) == step


@pytest.mark.parametrize("bounds, message", [
    ("[1e-3,1e-2]", "finetune.lr_bounds=[0.001, 0.01] is not allowed: the bounds must enclose finetune.lrs "
                    "(0.0003 to 0.003)"),
    ("[1e-5,5e-3]", "finetune.lr_bounds=[1e-05, 0.005] is not allowed: the bounds must enclose finetune.feature_lrs "
                    "(0.001 to 0.01)"),
    ("[1e-2,1e-5]", "finetune.lr_bounds=[0.01, 1e-05] is not allowed: expected two positive numbers [low, high] "
                    "with low < high"),
    ("[0,1e-1]", "finetune.lr_bounds=[0, 0.1] is not allowed: expected two positive numbers"),
    ("[1e-5]", "finetune.lr_bounds=[1e-05] is not allowed: expected two positive numbers"),
])
def test_bounds_that_are_not_two_rates_around_the_grids_are_refused_at_start_up_naming_the_key(bounds, message):
    from pipeline.config import compose, validate
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        validate(compose([f"finetune.lr_bounds={bounds}"]))
    assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize("bounds, message", [
    ("[1,1e4]", "finetune.tfidf.c_bounds=[1, 10000.0] is not allowed: the bounds must enclose finetune.tfidf.c "
                "(0.1 to 100)"),
    ("[1e4,1e-3]", "finetune.tfidf.c_bounds=[10000.0, 0.001] is not allowed: expected two positive numbers [low, high] "
                   "with low < high (the lowest and highest C"),
    ("[-1,1e4]", "finetune.tfidf.c_bounds=[-1, 10000.0] is not allowed: expected two positive numbers"),
])
def test_c_bounds_that_are_not_two_values_around_tfidf_s_grid_are_refused_naming_the_key(bounds, message):
    from pipeline.config import compose, validate
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        validate(compose([f"finetune.tfidf.c_bounds={bounds}"]))
    assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)


def test_the_held_out_split_keeps_each_group_whole_and_is_the_same_every_time():
    dev = [Example(f"t{i}", None, i % 2, group=f"chapter{i // 10}") for i in range(200)]
    task = TaskData("t", ["a", "b"], dev[:5], dev)
    a, b = split_heldout(task, 0.5, 7), split_heldout(task, 0.5, 7)
    assert a.dev == b.dev and a.test == b.test
    assert len(a.dev) + len(a.test) == 200 and len(a.test) == 100  # 10 of the 20 chapters
    assert not {e.group for e in a.dev} & {e.group for e in a.test}
    assert split_heldout(task, 0.5, 8).test != a.test


@pytest.mark.parametrize("fraction", [0.01, 0.99])
def test_a_split_that_leaves_a_side_empty_is_refused_naming_the_key(fraction):
    task = TaskData("t", ["a", "b"], [], [Example(f"t{i}", None, 0, group=f"g{i // 50}") for i in range(100)])
    with pytest.raises(DataError, match=r"finetune\.test_fraction=.* leaves the (dev|test) split of task t empty"):
        split_heldout(task, fraction, 0)


def test_the_word_order_control_shuffles_the_words_of_every_text_and_keeps_the_labels():
    rng = random.Random(0)
    task = TaskData("t", ["a", "b"], _sentiment(20, rng), _sentiment(10, rng))
    task.test = [Example("one two three four five six", "seven eight nine", 1)]
    shuffled = shuffled_words(task, 3)
    for split in ("train", "dev", "test"):
        for x, y in zip(getattr(task, split), getattr(shuffled, split)):
            assert Counter(x.text_a.split()) == Counter(y.text_a.split()) and x.label == y.label
    assert shuffled.test[0].text_a != task.test[0].text_a and sorted(shuffled.test[0].text_b.split()) == \
        ["eight", "nine", "seven"]
    assert shuffled_words(task, 3) == shuffled and shuffled.name == "t (words shuffled)"


def test_the_control_moves_a_word_s_tag_with_it_and_has_none_for_answer_spans():
    from pipeline.finetune.tasks.conll import NerTask, Sentence
    from pipeline.finetune.tasks.squad import Question, SquadTask

    ner = NerTask("ner", ["O", "B-PER"], [Sentence(("Ann", "met", "Bob", "today", "at", "noon"), (1, 0, 1, 0, 0, 0))],
                  [], test=[])
    s = shuffled_words(ner, 0).train[0]
    assert sorted(w for w, t in zip(s.words, s.tags) if t == 1) == ["Ann", "Bob"] and s.words != ner.train[0].words
    q = Question("q", "who?", "Ann met Bob", (("Ann", 0),))
    assert shuffled_words(SquadTask("squad", "1.1", [q], [q]), 0) is None


def test_the_reading_task_moves_words_and_nothing_else():
    """A swapped verse holds the same words (case aside) with the same punctuation at each position; an original
    one is the verse itself; the two classes are balanced and the task is the same every time."""
    task = word_order(400, 300, 0.1, 1234)
    assert task.labels == ["swapped", "original"] and word_order(400, 300, 0.1, 1234) == task
    assert 0.4 < np.mean([e.label for e in task.train]) < 0.6
    from pipeline.data.corpus import bible_verses

    verses = {v.text for v in bible_verses()}
    for e in task.train:
        if e.label == 1:
            assert e.text_a in verses
    swapped = [e for e in task.train if e.label == 0]
    assert swapped and all(e.text_a not in verses for e in swapped)
    rng = random.Random(0)
    text = "And God said, Let there be light: and there was light."
    out = swap_words(text, rng, swaps=2)
    punct = lambda t: [re.sub(r"\w", "", w) for w in t.split()]  # noqa: E731
    assert punct(out) == punct(text)
    assert Counter(re.findall(r"\w+", out.lower())) == Counter(re.findall(r"\w+", text.lower()))
    assert sum(a != b for a, b in zip(out.split(), text.split())) == 4  # two pairs, no word moved twice
    assert swap_words("the the the the", rng, swaps=1) is None and distinct_words("a A b, b.") == 2


def test_the_pair_task_pairs_a_verse_with_the_next_or_with_another_chapter_of_its_book():
    """verse_next: a ``next`` pair is two consecutive verses of one chapter; an ``other chapter`` pair's B is from
    another chapter of the same book and the same split (held-out pairs hold held-out chapters only); no verse is
    an A twice (half the verses make pairs, less a pair per chapter), the classes are balanced, and the task is the same every time."""
    from pipeline.data.corpus import bible_verses, in_valid_split

    task = verse_next(None, None, 0.1, 1234)
    assert task.labels == ["other chapter", "next"] and verse_next(None, None, 0.1, 1234) == task
    where = {}
    for v in bible_verses():
        where.setdefault(v.text, []).append(v)
    for split, held in (("train", False), ("dev", True)):
        examples = getattr(task, split)
        assert 0.45 < np.mean([e.label for e in examples]) < 0.55
        for e in examples:
            pairs = [(a, b) for a in where[e.text_a] if a.document_id == e.group for b in where[e.text_b]]
            if e.label == 1:
                assert any(b.document_id == a.document_id and b.verse == a.verse + 1 for a, b in pairs)
            else:
                assert any(b.book == a.book and b.chapter != a.chapter
                           and in_valid_split(b.document_id, 0.1, 1234) == held for a, b in pairs)
            assert pairs and in_valid_split(e.group, 0.1, 1234) == held
    verses = sum(1 for _ in bible_verses())
    assert verses // 2 - 1189 < len(task.train) + len(task.dev) <= verses // 2  # each verse in one pair at most


def test_the_word_order_task_refuses_a_bad_setting_naming_it():
    with pytest.raises(DataError, match=r"task\.data\.swaps=0"):
        word_order(10, 10, 0.1, 0, swaps=0)


@pytest.mark.parametrize("override, message", [
    ("task.data.swaps=50", "task.data.swaps=50 is not allowed: expected at most 25 (no verse of the held-out "
                           "chapters has 100 different words and at least 6 words)"),
    ("task.data.min_words=500", "task.data.min_words=500 is not allowed: expected at most 80 (no verse of the "
                                "held-out chapters has 500 words)"),
])
def test_a_word_order_setting_no_verse_allows_is_refused_naming_it_and_the_most_the_verses_allow(
        tmp_path, capsys, override, message):
    """Not the split's fault (it used to name valid_fraction): the stage stops in one line naming the task's
    setting and the most the Bible's verses allow on both sides of the split, before any training. The same
    setting one below that most loads."""
    from pipeline.config import compose
    from pipeline.stage import run_stage as stage
    from pipeline.stages.finetune import run

    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "config.json").write_text("{}")  # never read: the task is loaded first
    with pytest.raises(SystemExit) as e:
        stage("finetune", run, compose(["~suite", "task=word_order", override,
                                        f"finetune.init_from={tmp_path / 'export'}",
                                        f"tracking.uri={(tmp_path / 'mlruns').as_uri()}",
                                        f"paths.metrics={tmp_path / 'metrics'}"]))
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: finetune: {message}"]
    assert not (tmp_path / "metrics").exists()
    cfg = compose(["task=word_order"]).task.data
    key, most = override.split("=")[0].split(".")[-1], int(re.search(r"at most (\d+)", message).group(1))
    assert word_order(10, 10, cfg.valid_fraction, cfg.split_seed, **{key: most}).dev


def test_mean_pooling_reads_the_mean_of_the_real_tokens():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, hidden_dropout_prob=0.0)
    model = BertForSequenceClassification(config, 3, pooling="mean").eval()
    ids = torch.tensor([[2, 7, 8, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    with torch.no_grad():
        h = model.bert(ids, None, mask).last_hidden_state[0, :4].mean(0)
        torch.testing.assert_close(model(ids, None, mask)[0], model.classifier(h))
    with pytest.raises(ValueError, match="pooling='cls'"):
        BertForSequenceClassification(config, 3, pooling="cls")


def test_from_scratch_starts_from_bert_s_own_initialisation(tmp_path):
    """The export's config asks for the local attention start (a pretraining speed-up); from scratch gets BERT's
    normal one: its position table is N(0, 0.02), not the local start's zeros and code."""
    from conftest import tiny_export
    from pipeline.architectures import open_export
    from pipeline.model.hf import config_from_hf

    folder = tiny_export(tmp_path, attention_init="local", num_attention_heads=1) / "hf"
    assert config_from_hf(__import__("json").loads((folder / "config.json").read_text())).attention_init == "local"
    net = open_export(folder).task_model("sentence", 2, pretrained=False, pooling="mean")
    table = net.bert.embeddings.position_embeddings.weight
    assert (table[:, :4] != 0).all() and 0.01 < table.std().item() < 0.03


def test_length_grouped_batches_keep_every_example_and_reshuffle_every_epoch():
    """Lightning sets the epoch of a loader's sampler, not of its batch sampler: each pass is the next epoch by
    itself, and setting the epoch again replays it."""
    lengths = np.random.default_rng(0).integers(3, 60, size=70)
    sampler = LengthGroupedBatches(lengths, 8, seed=0, drop_last=False)
    first, second = list(sampler), list(sampler)
    assert sorted(i for b in first for i in b) == list(range(70)) and len(first) == 9
    assert first != second and sorted(i for b in second for i in b) == list(range(70))
    sampler.set_epoch(0)
    assert list(sampler) == first
    assert len(list(LengthGroupedBatches(lengths, 8, seed=0))) == 8
