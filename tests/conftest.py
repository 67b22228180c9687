from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
# The BERT size the model tests use: every part present, milliseconds per step.
TINY_BERT = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=64)


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test when it is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


def chromedriver() -> str:
    """Chromium's driver for the browser tests. Without it a test skips, except under CI (`.ci/run` sets
    BERT_LAB_REQUIRE_BROWSER=1 after installing Chromium), where a missing browser fails the test instead of
    hiding behind a skip."""
    driver = shutil.which("chromedriver")
    if driver is None:
        message = "Chromium's driver is not installed (Debian: apt-get install chromium chromium-driver)"
        if os.environ.get("BERT_LAB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{message}, and BERT_LAB_REQUIRE_BROWSER=1 requires it")
        pytest.skip(message)
    return driver


_STORE: list[Path] = []  # the session's empty MLflow store, its tables made once


def tracking_store(folder: Path) -> str:
    """The tracking URI of an MLflow store (sqlite) in ``folder``, with MLflow's tables already made: a copy of one
    empty store, made once a session (making the tables takes 1.5 to 2.5 s a store). Tests of a store made from
    nothing (tests/test_tracking.py) make their own."""
    if not _STORE:
        from mlflow.tracking import MlflowClient

        template = Path(tempfile.mkdtemp(prefix="bert-lab-store-")) / "mlflow.db"
        MlflowClient(f"sqlite:///{template}").search_experiments()
        _STORE.append(template)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "mlflow.db").exists():
        shutil.copyfile(_STORE[0], folder / "mlflow.db")
    return f"sqlite:///{folder / 'mlflow.db'}"


def run_stage(stage: str, *overrides: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run ``python -m stages.<stage>`` with Hydra overrides, as a person would."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run([sys.executable, "-m", f"stages.{stage}", *overrides], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def run_stage_here(stage: str, *overrides: str, cwd: Path = ROOT,
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``run_stage`` in this process, without paying for importing torch and Lightning again: the config Hydra's
    ``@hydra.main`` composes from ``key=value`` overrides (not resolved up front, as there), then the entry point's
    ``pipeline.stage.run_stage``. Its exit status, stdout (log lines included, as Hydra's ``stdout`` job logging
    prints them), and stderr (warnings and a traceback included, as a subprocess prints them) come back as a
    ``CompletedProcess``; ``env`` replaces ``os.environ`` for the call. What a subprocess kept to itself is put
    back afterwards: the environment, the current folder, torch's threads, determinism flags and the random states,
    logging, and the warning filters. Hydra's own flags (``--cfg``, ``-m``, ``--config-name``) need ``run_stage``."""
    import contextlib
    import importlib
    import io
    import logging
    import random
    import traceback
    import warnings

    import numpy as np
    import torch
    from hydra import compose, initialize_config_dir

    from pipeline.stage import run_stage as stage_entry

    assert not any(o.startswith("-") for o in overrides), f"{overrides}: Hydra's flags need run_stage (a subprocess)"
    fn = importlib.import_module(f"stages.{stage}").run
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    threads, rng = torch.get_num_threads(), (torch.get_rng_state(), np.random.get_state(), random.getstate())
    determinism = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
                   torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    root = logging.getLogger()
    loggers = [root] + [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric",
               "lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")]
    saved_logging = [(lg, lg.level, lg.handlers[:], lg.filters[:]) for lg in loggers]
    saved_handler_filters = [(h, h.filters[:]) for lg in loggers for h in lg.handlers]
    handler = logging.StreamHandler(out)  # Hydra's job_logging=stdout: the root logger, INFO and up, on stdout
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))

    def show(message, category, filename, lineno, file=None, line=None):
        err.write(warnings.formatwarning(message, category, filename, lineno, line))

    returncode = 0
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.chdir(cwd)
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.showwarning = show
            try:
                with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
                    cfg = compose("config", overrides=list(overrides))
                stage_entry(stage, fn, cfg)
            except SystemExit as e:
                if e.code is None or isinstance(e.code, int):
                    returncode = e.code or 0
                else:
                    print(e.code, file=sys.stderr)
                    returncode = 1
            except Exception:
                traceback.print_exc()
                returncode = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        torch.set_num_threads(threads)
        torch.set_rng_state(rng[0])
        np.random.set_state(rng[1])
        random.setstate(rng[2])
        torch.use_deterministic_algorithms(determinism[0], warn_only=determinism[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = determinism[2:]
        for lg, level, handlers, filters in saved_logging:
            lg.setLevel(level)
            lg.handlers[:] = handlers
            lg.filters[:] = filters
        for h, filters in saved_handler_filters:
            h.filters[:] = filters
    return subprocess.CompletedProcess([sys.executable, "-m", f"stages.{stage}", *overrides], returncode,
                                       out.getvalue(), err.getvalue())


def vocab_txt_pair(vocab_txt: Path, folder: Path, lowercase: bool):
    """(ours, the original) built from a vocab.txt-only BERT folder: ``load_tokenizer`` and ``BertTokenizerLegacy``."""
    import json

    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    from pipeline.data.tokenizer import load_tokenizer

    folder.mkdir()
    (folder / "vocab.txt").write_bytes(vocab_txt.read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lowercase}), encoding="utf-8")
    return load_tokenizer(folder), BertTokenizerLegacy(vocab_file=str(folder / "vocab.txt"), do_lower_case=lowercase)


def original_ids(slow, line: str) -> list[int]:
    return slow.convert_tokens_to_ids(slow.tokenize(line))


def tiny_export(root: Path, **config) -> Path:
    """A 1-layer BERT export with a 500-piece Bible vocabulary in ``root/pretrain``, as the pretrain stage writes it
    (``config``: BertConfig settings beside the tiny size's)."""
    from pipeline.data.corpus import bible_documents
    from pipeline.io import write_json
    from pipeline.model.bert import BertForPreTraining
    from pipeline.model_config import BertConfig
    from pipeline.model.hf import save_hf
    from pipeline.data.wordpiece import train_wordpiece

    docs = list(bible_documents())[:200]
    train_wordpiece((s for d in docs for s in d.sentences), root / "tokenizer", vocab_size=500, progress=False)
    model = BertForPreTraining(BertConfig(**{**dict(vocab_size=500, hidden_size=32, num_hidden_layers=1,
                                                    num_attention_heads=2, intermediate_size=64,
                                                    max_position_embeddings=128), **config}))
    save_hf(model, root / "pretrain" / "hf", tokenizer_dir=root / "tokenizer")
    write_json(root / "pretrain" / "run.json", {"mlflow_run_id": "none"})
    return root / "pretrain"


@pytest.fixture(scope="session")
def wikitext(tmp_path_factory):
    """WikiText-2 ``valid`` (~250k word pieces of real text) as our pipeline sees it.

    Articles split into sentences, a WordPiece vocabulary of 8,000 trained on
    them, and the text encoded; skipped when ../shared/data is absent.
    """
    from types import SimpleNamespace

    from pipeline.data.corpus import clean, wikitext_documents, write_documents
    from pipeline.data.encoded import encode_corpus
    from pipeline.data.tokenizer import load_tokenizer, special_ids, vocab_list
    from pipeline.data.wordpiece import train_wordpiece

    src = shared_data("wikitext-2", "valid.txt")
    root = tmp_path_factory.mktemp("wikitext")
    docs = [clean(d) for d in wikitext_documents(str(src))]
    with open(root / "valid.txt", "w", encoding="utf-8") as f:
        write_documents(docs, f)
    train_wordpiece((s for d in docs for s in d.sentences), root / "tok", vocab_size=8000, progress=False)
    tok = load_tokenizer(root / "tok")
    corpus = encode_corpus(tok, root / "valid.txt", root / "encoded", progress=False)
    assert corpus.meta["n_tokens"] >= 100_000
    return SimpleNamespace(root=root, text=root / "valid.txt", tok=tok, ids=special_ids(tok), corpus=corpus,
                           vocab=vocab_list(tok))


LONGEST = "test_pipeline_e2e.py"  # about 20 of the slow marker's minutes, its checks sharing one pipeline run


@pytest.hookimpl(trylast=True)  # after `-m` deselected what does not run
def pytest_collection_modifyitems(config, items):
    """The order in which pytest-xdist hands whole files to its workers (pyproject: ``--dist loadfile
    --no-loadscope-reorder``): the end-to-end file first, then the file with the fewest tests (a worker starts
    with two files, so the smallest goes with the longest), then the rest from most tests to fewest. Any order
    runs the same tests; this one keeps the other worker busy while the end-to-end file runs."""
    counts = Counter(item.path for item in items)
    smallest = min(counts, key=lambda p: (counts[p], str(p)), default=None)

    def rank(item):
        if item.path.name == LONGEST:
            return (0, 0, "")
        return (1, 0, "") if item.path == smallest else (2, -counts[item.path], str(item.path))

    items.sort(key=rank)  # stable: the tests of a file keep their order
