"""Bad and odd input: each gets a clear message or a documented handling (README, "Bad input")."""
from __future__ import annotations

import itertools
import random
import subprocess

import numpy as np
import pytest

from conftest import ROOT, original_ids, run_stage, run_stage_here, vocab_txt_pair
from pipeline.data.corpus import bible_documents, prepare_corpus, text_documents
from pipeline.data.pairs import make_examples
from pipeline.data.shards import PairsDataset
from pipeline.data.tokenizer import load_tokenizer, special_ids
from pipeline.data.wordpiece import train_wordpiece
from pipeline.settings import PairsSettings

ODD = [
    "tab\there, non\u00a0breaking, thin\u2009space, ideographic\u3000space",
    "zero\u200bwidth joiner\u200d and bidi \u202emarks\u202c",
    "bell\x07, escape\x1b[0m, delete\x7f, C1 \x85\x9f controls",
    "中文字符没有空格也要拆开，日本語のかな、한국어 문장",
    "Ελληνικά, русский текст, עברית, العربية, हिन्दी",
    "ﬁ ligature, ＦＵＬＬ width, ½ fraction, Å angstrom, e\u0301 combining",
    "emoji 🤗🧪 and symbols ∑∫√ and a mathematical 𝔅𝔈ℜ𝔗",
]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok") / "tokenizer"
    docs = list(itertools.islice(bible_documents(), 0, 1189, 5))
    train_wordpiece([s for d in docs for s in d.sentences] + ODD, out, vocab_size=1500, progress=False)
    return out


@pytest.mark.parametrize("lowercase", [True, False])
def test_odd_characters_tokenize_as_the_original_bert_tokenizer(tok_dir, tmp_path, lowercase):
    """Control characters, odd whitespace, CJK (split per character), other scripts: the original's ids."""
    ours, slow = vocab_txt_pair(tok_dir / "vocab.txt", tmp_path / "bert", lowercase)
    for line in ODD:
        assert ours.encode(line, add_special_tokens=False).ids == original_ids(slow, line), line
    cjk = ours.encode("中文字符", add_special_tokens=False).tokens
    assert len(cjk) == 4  # one piece per character, as the original splits CJK


def test_a_ten_megabyte_line_is_one_long_sentence_cut_to_the_sequence_length(tok_dir, tmp_path):
    rng = random.Random(0)
    words = [w for d in itertools.islice(bible_documents(), 50) for s in d.sentences for w in s.split()]
    huge = " ".join(rng.choice(words) for _ in range(1_900_000))[:10_000_000]  # 10 MB, no line break
    docs = ["\n".join(d.sentences) for d in itertools.islice(bible_documents(), 100, 130)]
    src = tmp_path / "in.txt"
    src.write_text("\n\n".join(docs[:15] + [huge + "\nA normal sentence after it."] + docs[15:]) + "\n",
                   encoding="utf-8")
    stats = prepare_corpus(text_documents([str(src)]), tmp_path / "corpus", valid_fraction=0.3, seed=0,
                           progress=False)
    assert stats["train"]["words"] + stats["valid"]["words"] > 1_800_000
    assert stats["train"]["documents"] >= 2 and stats["valid"]["documents"] >= 2
    tok = load_tokenizer(tok_dir)
    ids = special_ids(tok)
    for split in ("train", "valid"):
        make_examples(tok, tmp_path / "corpus" / f"{split}.txt", tmp_path / "pairs" / split,
                      PairsSettings(format="nsp_pairs", max_seq_length=128, short_seq_prob=0.1, dupe_factor=1,
                                    shard_tokens=250_000),
                      seed=0, cls_id=ids["cls"], sep_id=ids["sep"], num_workers=1, progress=False)
    lengths = [len(ds[i]["input_ids"]) for split in ("train", "valid")
               for ds in [PairsDataset(tmp_path / "pairs" / split)] for i in range(len(ds))]
    assert max(lengths) <= 128 and len(lengths) > 100
    # The long sentence feeds examples like any other: cut to fit (the original script truncates it too).
    assert np.mean(np.array(lengths) == 128) > 0.3


def _stage_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    return r.stderr.strip().splitlines()[-1]


def test_a_config_key_that_does_not_exist_is_named(tmp_path):
    r = run_stage("pretrain", "trainer.max_step=5", f"paths.metrics={tmp_path}")
    err = r.stderr
    assert r.returncode == 1 and "trainer.max_step" in err and "Traceback" not in err, err[-2000:]
    assert "Key 'max_step' is not in struct" in err


@pytest.mark.parametrize("override, message", [
    ("trainer.max_steps=many", "trainer.max_steps='many' is not allowed: expected a positive integer"),
    ("finetune.seeds=3", "finetune.seeds=3 is not allowed: expected a non-empty list of integers"),
    ("masking.whole_word=sometimes", "masking.whole_word='sometimes' is not allowed: expected true or false"),
    # read by a resolver (the grid's runs) while the settings are composed: OmegaConf wraps the error
    ("grid.seeds.baseline=many", "grid.seeds.baseline='many' is not allowed: expected a positive integer "
                                 "(pretraining runs)"),
])
def test_a_value_of_the_wrong_type_is_named(tmp_path, override, message):
    r = run_stage_here("pretrain", override, f"paths.metrics={tmp_path}")
    assert r.returncode == 2
    assert _stage_error(r) == f"error: pretrain: {message}"
    assert list(tmp_path.iterdir()) == []


def test_a_vocabulary_too_small_for_the_special_tokens_is_refused(tmp_path):
    r = run_stage("train_wordpiece", "tokenizer.vocab_size=5", f"paths.tokenizer={tmp_path / 'tok'}")
    assert _stage_error(r).startswith("error: train_wordpiece: tokenizer.vocab_size=5 is not allowed: expected an "
                                      "integer large enough for the 5 special tokens")


def test_a_sequence_longer_than_the_position_table_is_refused(tmp_path):
    r = run_stage("make_pairs", "pairs.max_seq_length=512", f"paths.pairs={tmp_path / 'p'}")
    assert _stage_error(r) == ("error: make_pairs: pairs.max_seq_length=512 is not allowed: expected at most "
                               "model.max_position_embeddings=128 (the position table)")


@pytest.mark.parametrize("override, key", [("eval_set.layout.lengths=[16,256]", "eval_set.layout.lengths[1]=256"),
                                           ("eval_set.max_seq_length=200", "eval_set.max_seq_length=200")])
def test_a_probe_or_fixed_set_longer_than_the_position_table_is_refused(tmp_path, override, key):
    r = run_stage_here("eval_set", override, f"paths.eval_set={tmp_path / 'e'}")
    assert r.returncode == 2 and _stage_error(r) == (f"error: eval_set: {key} is not allowed: expected at most "
                                                     "model.max_position_embeddings=128 (the position table)")
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("override, message", [
    ("eval_set.layout.lengths=[16,16]", "eval_set.layout.lengths=[16, 16] is not allowed: 16 is listed 2 times"),
    ("eval_set.layout.along_rows=700", "eval_set.layout.along_rows=700 is not allowed: expected at most "
                                       "eval_set.layout.rows=600"),
    ("eval_set.layout.lengths=[2]", "eval_set.layout.lengths=[2] is not allowed: expected a non-empty list of "
                                    "lengths >= 4"),
])
def test_bad_probe_settings_are_named(tmp_path, override, message):
    r = run_stage_here("eval_set", override, f"paths.eval_set={tmp_path / 'e'}")
    assert r.returncode == 2 and _stage_error(r).startswith(f"error: eval_set: {message}")



# Each task loader (a `_target_` of conf/task) and the setting that points it at its data; None: data it ships with.
DATA_SETTING = {"pipeline.finetune.tasks.glue": "data_dir", "pipeline.finetune.tasks.squad": "train",
                "pipeline.finetune.tasks.conll": "train", "pipeline.finetune.tasks.table": "train",
                "pipeline.finetune.tasks.hf_dataset": "path", "pipeline.finetune.tasks.bible_sections": None,
                "pipeline.finetune.tasks.word_order": None, "pipeline.finetune.tasks.verse_next": None}
TASKS = sorted(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml"))


def _finetune_start(tmp_path) -> list[str]:
    """Overrides that get the finetune stage as far as loading its task: an export folder to start from (never
    read before the task is) and a tracking store that needs no set-up."""
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "config.json").write_text("{}")
    return [f"finetune.init_from={tmp_path / 'export'}", f"tracking.uri={(tmp_path / 'mlruns').as_uri()}",
            f"paths.metrics={tmp_path / 'metrics'}"]


@pytest.mark.parametrize("task", TASKS)
def test_a_task_whose_data_is_missing_stops_with_one_line_naming_the_path(tmp_path, capsys, task):
    """Every loader, called through Hydra's instantiate: the loader's message as the stage's one line, exit 2
    (not Hydra's "Error in call to target" report and exit 1)."""
    from pipeline.config import compose
    from pipeline.stages.finetune import run
    from pipeline.stage import run_stage as stage

    target = compose([f"task={task}"]).task.data._target_
    assert target in DATA_SETTING, f"conf/task/{task}.yaml: loader {target} is new here; add its data setting"
    if DATA_SETTING[target] is None:
        pytest.skip(f"{task}: its data ships with the lab")
    missing = tmp_path / "nowhere"
    cfg = compose([f"task={task}", f"task.data.{DATA_SETTING[target]}={missing}", *_finetune_start(tmp_path)])
    with pytest.raises(SystemExit) as e:
        stage("finetune", run, cfg)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: finetune: ") and str(missing) in err[0], err
    assert not (tmp_path / "metrics").exists()


def test_the_finetune_stage_names_a_missing_glue_folder_in_one_line(tmp_path):
    """The same through the entry point a person runs (the issue's example)."""
    r = run_stage("finetune", "task=stsb", "task.data.data_dir=/nonexistent", *_finetune_start(tmp_path))
    assert r.returncode == 2, r.stderr[-3000:]
    assert r.stderr.strip().splitlines() == ["error: finetune: /nonexistent/STS-B: GLUE task folder not found (set "
                                             "task.data.data_dir to your GLUE data directory)"]



def test_a_repeated_fine_tuning_seed_is_refused_at_the_stage_s_start(tmp_path, capsys):
    from pipeline.config import compose
    from pipeline.stages.finetune import run
    from pipeline.stage import run_stage as stage

    with pytest.raises(SystemExit) as e:
        stage("finetune", run, compose(["finetune.seeds=[0,1,0]", *_finetune_start(tmp_path)]))
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: finetune: finetune.seeds=[0, 1, 0] is not allowed: 0 is listed 2 times; expected distinct seeds "
        "(each is one run; a repeat would count the same run twice)"]
    assert not (tmp_path / "metrics").exists()


@pytest.mark.parametrize("override, message", [
    ("finetune.lrs=[1e-3,-1e-3]", "finetune.lrs=[0.001, -0.001] is not allowed: expected a non-empty list of positive "
                                  "numbers"),
    ("finetune.feature_lrs=[1e-3,1e-3]", "finetune.feature_lrs=[0.001, 0.001] is not allowed: 0.001 is listed 2 "
                                         "times"),
    ("finetune.poolings=[mean,cls]", "finetune.poolings=['mean', 'cls'] is not allowed: expected a non-empty list "
                                     "of: token, mean"),
    ("finetune.test_fraction=0.001", "finetune.test_fraction=0.001 leaves the test split of task bible_sections "
                                     "empty"),
])
def test_a_bad_choice_grid_or_split_is_refused_before_any_training(tmp_path, capsys, override, message):
    """The protocol's settings: each refused in one line naming the key, before any training (the split: once the
    task's held-out chapters are known, before the export is read)."""
    from pipeline.config import compose
    from pipeline.stages.finetune import run
    from pipeline.stage import run_stage as stage

    with pytest.raises(SystemExit) as e:
        stage("finetune", run, compose(["~suite", override, *_finetune_start(tmp_path)]))
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: finetune: {message}"), err
    assert not (tmp_path / "metrics").exists()
