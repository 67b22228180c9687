"""Stage entry points: bad input stops with one line, a non-zero exit and no partial outputs;
dvc.yaml lists exactly the modules each stage imports."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run_stage, run_stage_here, shared_data, tiny_export, tracking_store

DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())


def _paths(tmp: Path) -> list[str]:
    return [f"paths.{k}={tmp / k}" for k in ("corpus", "tokenizer", "pairs", "pretrain", "metrics", "plots",
                                             "reports")]


def _assert_clean_failure(r: subprocess.CompletedProcess, stage: str, *fragments: str) -> None:
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and r.stderr.strip().splitlines()[-1] == errors[0], r.stderr[-2000:]
    assert errors[0].startswith(f"error: {stage}: ")
    for f in fragments:
        assert f in errors[0], errors[0]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("content, fragment", [
    (None, "no file matches"),
    ("", "is empty"),
    ("only one sentence.\n\nand another document of one.\n\nthird.\n", "every document is one sentence long"),
])
def test_prepare_corpus_bad_corpus(tmp_path, content, fragment):
    f = tmp_path / "corpus.txt"
    if content is not None:
        f.write_text(content)
    r = run_stage_here("prepare_corpus", "corpus=text", f"corpus.source.paths=[{f}]", "runtime.progress=false",
                  *_paths(tmp_path))
    _assert_clean_failure(r, "prepare_corpus", fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["corpus.txt"] if content is not None else [])


@pytest.mark.parametrize("override, fragment", [
    ("masking.mlm_probability=1.5", "masking.mlm_probability=1.5"),
    ("model.hidden_size=129", "model.hidden_size=129 is not allowed: expected a multiple of"),
])
def test_pretrain_bad_settings(tmp_path, override, fragment):
    r = run_stage_here("pretrain", override, *_paths(tmp_path))
    _assert_clean_failure(r, "pretrain", fragment)
    assert list(tmp_path.iterdir()) == []


# One interpreter imports the heavy libraries once (none of the lab's modules), then forks a child per stage module
# that imports it and names the lab's modules it loaded: a fresh import each, without paying for torch each time
# (13 interpreters took 90 s of the suite). The libraries only speed it up: the child's own imports decide the set.
_IMPORTS = """
import importlib, json, os, sys
for heavy in ("torch", "lightning", "mlflow", "hydra", "omegaconf", "numpy", "scipy.stats", "matplotlib.pyplot",
              "tokenizers", "yaml"):
    try:
        importlib.import_module(heavy)
    except ImportError:
        pass
assert not [m for m in sys.modules if m.split(".")[0] in ("pipeline", "stages")]
out = {}
for module in sys.argv[1:]:
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        importlib.import_module(module)
        files = [m.__file__ for m in list(sys.modules.values())
                 if getattr(m, "__file__", None) and m.__name__.split(".")[0] in ("pipeline", "stages")]
        with os.fdopen(w, "w") as f:
            f.write(json.dumps(files))
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out[module] = json.loads(f.read())
    os.wait()
print(json.dumps(out))
"""


def _stage_module(spec: dict) -> str:
    """The module a stage runs (``python -m <module>``); a variant stage (foreach) runs its base stage's."""
    return re.match(r"python -m (\S+)", spec.get("do", spec)["cmd"]).group(1)


@pytest.fixture(scope="module")
def imported() -> dict[str, set[str]]:
    """Each stage's module -> the lab's modules importing it loads (empty ``__init__.py`` files carry no code)."""
    modules = sorted({_stage_module(spec) for spec in DVC["stages"].values()})
    out = subprocess.run([sys.executable, "-c", _IMPORTS, *modules], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    files = {m: {Path(p).resolve().relative_to(ROOT).as_posix() for p in ps} for m, ps in json.loads(out).items()}
    return {m: {f for f in fs if (ROOT / f).read_text().strip()} for m, fs in files.items()}


@pytest.mark.parametrize("stage", DVC["stages"])
def test_dvc_deps_are_exactly_the_imported_modules(stage, imported):
    spec = DVC["stages"][stage]
    module = _stage_module(spec)
    spec = spec.get("do", spec)  # a variant stage (foreach) runs its base stage's script
    deps = {d for d in spec["deps"] if d.endswith(".py")}
    for d in spec["deps"]:  # a package named whole (pipeline/report/sections/) stands for every module in it
        if d.startswith("pipeline/") and (ROOT / d).is_dir() and list((ROOT / d).glob("*.py")):
            deps |= {p.relative_to(ROOT).as_posix() for p in (ROOT / d).rglob("*.py") if p.read_text().strip()}
    assert deps == imported[module]


@pytest.mark.slow  # a whole stage end to end: the slow marker, which CI runs too
def test_finetune_stage_on_glue_mrpc(tmp_path):
    """The finetune stage on a GLUE task from a data directory, starting from an HF-format export."""
    from pipeline.names import MODES

    glue_dir = shared_data("glue")
    tiny_export(tmp_path)
    r = run_stage_here("finetune", "task=mrpc", f"task.data.data_dir={glue_dir}", "task.data.train_size=64",
                  "task.data.dev_size=64", "finetune.epochs=1", "finetune.seeds=[0,1]", "runtime.progress=false",
                  f"finetune.modes=[{','.join(MODES)}]", "finetune.lrs=[1e-3,3e-3]", "finetune.feature_lrs=[1e-3]",
                  "finetune.lr_bounds=[1e-3,3e-3]", "finetune.tfidf.c=[1.0]",  # bounds on the grid: not extended
                  "finetune.poolings=[token,mean]",
                  f"tracking.uri={tracking_store(tmp_path)}", *_paths(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads((tmp_path / "metrics" / "finetune.json").read_text())
    assert result["task"] == "MRPC" and result["train_examples"] == 64 and result["scored_on"] == "test"
    assert result["dev_examples"] + result["test_examples"] == 64 and result["dev_examples"] == 32  # by example

    assert set(result["modes"]) == set(MODES) and result["metrics"] == ["f1", "accuracy"]
    for mode, r in result["modes"].items():
        # from scratch: a seed for each of the default grid's 3 baseline pretraining runs (its only units)
        assert 0 <= r["accuracy_mean"] <= 1 and 0 <= r["f1_mean"] <= 1 and r["n"] == {"tfidf": 1, "scratch": 3}.get(
            mode, 2)
    assert len(result["modes"]["frozen_weighted"]["runs"][0]["layer_weights"]) == 2  # embeddings + 1 layer
    # each mode chose on dev: 2 rates x 2 poolings fine-tuned, 2 poolings on frozen features, TF-IDF's 2 n-grams
    grids = {mode: len(r["selection"]["grid"]) for mode, r in result["modes"].items()}
    assert grids == {**dict.fromkeys(MODES, 2), "pretrained": 4, "scratch": 4}
    assert all(r["selection"]["by"] == "baseline" for r in result["modes"].values())
    from mlflow.tracking import MlflowClient

    experiment = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_experiment_by_name("bert-lab")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # MLflow 3 opens on the runs


@pytest.mark.slow  # a whole stage end to end: the slow marker, which CI runs too
def test_finetune_stage_runs_one_task_of_a_suite_into_its_own_folder(tmp_path):
    """finetune@<run>-sst2 of suite=table6: SST-2 from the suite's GLUE folder, written under metrics/tasks/sst2."""
    glue_dir = shared_data("glue")
    tiny_export(tmp_path)
    r = run_stage_here("finetune", "suite=table6", "suite_task=sst2", f"suite.glue_dir={glue_dir}",
                  "suite.tasks.sst2.data.train_size=64", "suite.tasks.sst2.data.dev_size=32", "finetune.epochs=1",
                  "finetune.lrs=[1e-3]",
                  "finetune.seeds=[0]", "finetune.modes=[pretrained,tfidf]", "runtime.progress=false",
                  f"tracking.uri={tracking_store(tmp_path)}", *_paths(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (tmp_path / "metrics" / "finetune.json").exists()
    result = json.loads((tmp_path / "metrics" / "tasks" / "sst2" / "finetune.json").read_text())
    assert result["task"] == "SST-2" and result["train_examples"] == 64 and result["dev_examples"] == 16
    assert list(result["modes"]) == ["pretrained", "tfidf"]


@pytest.mark.slow  # half a minute: a transformers checkpoint fine-tuned in every mode (CI runs the slow marker too)
def test_finetune_starts_from_any_hugging_face_bert_folder(tmp_path):
    """A folder as published BERTs ship: weights, config.json, vocab.txt and no tokenizer.json."""
    import shutil

    import transformers

    from pipeline.data.corpus import bible_documents
    from pipeline.data.wordpiece import train_wordpiece

    docs = list(bible_documents())[:200]
    train_wordpiece((s for d in docs for s in d.sentences), tmp_path / "tok", vocab_size=500, progress=False)
    hf = transformers.BertForPreTraining(transformers.BertConfig(
        vocab_size=500, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=128))
    folder = tmp_path / "bert-folder"
    hf.save_pretrained(folder)
    shutil.copy(tmp_path / "tok" / "vocab.txt", folder / "vocab.txt")
    (folder / "tokenizer_config.json").write_text('{"do_lower_case": true}', encoding="utf-8")
    r = run_stage("finetune", f"finetune.init_from={folder}", "task.data.train_size=64", "task.data.dev_size=64",
                  "finetune.epochs=1", "finetune.modes=[pretrained]", "runtime.progress=false",
                  f"tracking.uri={tracking_store(tmp_path)}", *_paths(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads((tmp_path / "metrics" / "finetune.json").read_text())
    assert result["pretrain_run_id"] == f"external:{folder}" and result["train_examples"] == 64
    r = run_stage("finetune", f"finetune.init_from={tmp_path / 'nowhere'}", f"tracking.uri={tracking_store(tmp_path)}",
                  *_paths(tmp_path))
    assert r.returncode == 2 and "finetune.init_from" in r.stderr and "config.json" in r.stderr
