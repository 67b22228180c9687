"""The pretraining engine: objectives, presets, optimisers, budgets, resume after a kill, failure handling."""
from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import transformers

from conftest import ROOT, run_stage, run_stage_here, tracking_store
from pipeline.architectures import architecture
from pipeline.config import compose, validate
from pipeline.data.tokenizer import load_tokenizer
from pipeline.model.bert import BertConfig, BertForPreTraining, num_parameters, pretraining_loss
from pipeline.optim import build_optimizer
from pipeline.pretrain.module import BertPretraining
from pipeline.stages.pretrain import model_config as stage_model_config
from pipeline.stages.zero_shot import score_folder
from pipeline.zero_shot.along import along_pretraining


def model_config(cfg, vocab_size: int):
    """The pretrain stage's model config for a composed config (checked first, as the stage's start does)."""
    lab = validate(cfg)
    return stage_model_config(lab, architecture(lab.model.architecture), vocab_size)


# --------------------------------------------------------------------------- #
# Objectives
# --------------------------------------------------------------------------- #
def test_left_to_right_loss_is_hugging_faces_causal_lm_loss():
    torch.manual_seed(0)
    hf_cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, is_decoder=True,
                                     attn_implementation="sdpa")
    hf = transformers.BertLMHeadModel(hf_cfg).eval()
    ours = BertForPreTraining(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64, max_position_embeddings=64, causal=True)).eval()
    missing, unexpected = ours.load_state_dict(hf.state_dict(), strict=False)
    assert not unexpected and all(k.startswith(("cls.seq_relationship", "bert.pooler")) for k in missing)
    ids = torch.randint(5, 100, (3, 20))
    mask = torch.ones_like(ids)
    mask[1, 15:] = 0  # right padding
    module = BertPretraining(ours.config, None, nsp=False, optim={}, max_steps=1, seed=0, mask_id=4, cls_id=2,
                             sep_id=3)
    module.model = ours
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    inputs, positions, targets = module._inputs_and_targets(batch, 0, "train")
    assert torch.equal(inputs, ids) and (targets != -100).sum() == 3 * 19 - 5
    assert len(positions) == len(targets) and len(targets) % 64 == 0  # padded to few shapes; the padding ignored
    with torch.no_grad():
        out = ours(inputs, batch["token_type_ids"], mask, masked_positions=positions)
        loss = pretraining_loss(out, targets)[0]
        labels = ids.masked_fill(mask == 0, -100)
        ref = hf(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False).loss
    torch.testing.assert_close(loss, ref, atol=1e-5, rtol=1e-5)


def test_left_to_right_objective_builds_a_causal_model():
    cfg = compose(["objective=ltr"])
    validate(cfg)
    assert model_config(cfg, 1000).causal and not model_config(compose(), 1000).causal
    with pytest.raises(Exception, match="objective.nsp=true is not allowed"):
        validate(compose(["objective=ltr", "objective.nsp=true"]))


def test_a_causal_classifier_pools_the_last_real_token():
    from pipeline.model.bert import BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, causal=True)).eval()
    ids = torch.randint(5, 50, (2, 10))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        pooled = model(ids, attention_mask=mask).pooler_output
        alone = model(ids[1:, :6]).pooler_output  # the same text without padding
        changed = ids.clone()
        changed[0, 0] = 7 if ids[0, 0] != 7 else 8
        other = model(changed, attention_mask=mask).pooler_output
    torch.testing.assert_close(pooled[1], alone[0], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(pooled[0], other[0])  # the first token reaches the pooled vector


# --------------------------------------------------------------------------- #
# Presets and optimisers
# --------------------------------------------------------------------------- #
# Published sizes: Devlin et al. (110M, 340M); Turc et al. (4.4M, 11.3M, 29.1M, 41.7M).
@pytest.mark.parametrize("preset, millions", [
    ("base", 110), ("large", 340), ("tiny", 4.4), ("mini", 11.3), ("small", 29.1), ("medium", 41.7),
])
def test_size_presets_have_the_published_parameter_counts(preset, millions):
    cfg = compose([f"model={preset}"])
    with torch.device("meta"):
        model = BertForPreTraining(model_config(cfg, 30522))
    # Encoder + pooler + heads with the embedding matrix tied (BERT-Base: ~110M, Large: ~340M).
    assert num_parameters(model) / 1e6 == pytest.approx(millions, rel=0.015)


def test_depth_ablation_presets_differ_only_in_depth():
    a, b = (compose([f"model=depth{n}"]).model for n in (12, 24))
    assert (a.num_hidden_layers, b.num_hidden_layers) == (12, 24)
    assert {k: v for k, v in a.items() if k not in ("name", "num_hidden_layers")} == \
        {k: v for k, v in b.items() if k not in ("name", "num_hidden_layers")}


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_optimisers_exclude_layernorm_and_biases_from_decay_and_learn(name):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 1))
    optim = dict(name=name, lr=1e-2, betas=[0.9, 0.999], eps=1e-6, weight_decay=0.01, warmup_ratio=0.0,
                 schedule="linear", decay_ratio=1.0)
    built = build_optimizer(model, optim, total_steps=200)
    opt, sched = built["optimizer"], built["lr_scheduler"]["scheduler"]
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    x = torch.randn(256, 8)
    y = torch.tanh(x @ torch.randn(8, 1))  # learnable
    first = None
    for _ in range(100):
        loss = torch.nn.functional.mse_loss(model(x), y)
        first = first if first is not None else loss.item()
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    assert loss.item() < 0.3 * first
    assert type(opt).__name__ == {"adamw": "AdamW", "lamb": "Lamb"}[name]


# --------------------------------------------------------------------------- #
# Stage runs: resume after a kill, time budget, non-finite loss
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    """Corpus, tokenizer and pairs at the tiny experiment's size, built by the stages themselves (in this process;
    the eval_set stage through its entry point, its one run as a person runs it in the fast suite)."""
    root = tmp_path_factory.mktemp("pretrain")
    paths = [f"paths.{k}={root / k}" for k in ("corpus", "tokenizer", "pairs", "eval_set", "metrics", "plots")]
    for stage in ("prepare_corpus", "train_wordpiece", "make_pairs", "eval_set"):
        r = (run_stage if stage == "eval_set" else run_stage_here)(stage, "experiment=tiny", "runtime.progress=false",
                                                                    *paths)
        assert r.returncode == 0, r.stderr
    return root, paths


def _pretrain_overrides(root: Path, paths: list[str], name: str, *extra: str) -> list[str]:
    return ["experiment=tiny", "runtime.progress=false", *paths,
            f"paths.pretrain={root / name / 'out'}", f"paths.metrics={root / name / 'metrics'}",
            f"paths.checkpoints={root / name / 'ckpt'}", f"paths.plots={root / name / 'plots'}", *extra]


def _pretrain_args(root: Path, paths: list[str], name: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "stages.pretrain", *_pretrain_overrides(root, paths, name, *extra)]


def _pretrain_here(root: Path, paths: list[str], name: str, *extra: str) -> subprocess.CompletedProcess:
    """The pretrain stage in this process (``run_stage_here``), with the run's own MLflow store."""
    return run_stage_here("pretrain", *_pretrain_overrides(root, paths, name, *extra), env=_env(root))


def _env(root: Path) -> dict:
    return dict(os.environ, MLFLOW_TRACKING_URI=tracking_store(root))


@pytest.mark.slow  # a minute: two full runs and a killed one (CI runs the slow marker too)
def test_a_killed_run_resumes_where_it_stopped_and_ends_like_an_uninterrupted_one(small_data):
    root, paths = small_data
    extra = ["trainer.max_steps=60", "trainer.checkpoint_every_n_steps=10", "trainer.val_check_interval=30"]
    env = _env(root)
    subprocess.run(_pretrain_args(root, paths, "whole", *extra), cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=600)
    args = _pretrain_args(root, paths, "killed", *extra)
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not list((root / "killed" / "ckpt").glob("*/last.ckpt")) and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # a real kill, mid-epoch, with a checkpoint on disk
    proc.wait()
    assert not (root / "killed" / "out").exists()  # no half-written output
    r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    whole = json.loads((root / "whole" / "metrics" / "pretrain.json").read_text())
    resumed = json.loads((root / "killed" / "metrics" / "pretrain.json").read_text())
    assert 10 <= resumed["resumed_from_step"] < 60 and whole["resumed_from_step"] is None
    assert resumed["steps"] == whole["steps"] == 60
    for key in ("val/loss", "val/mlm_acc", "val/nsp_acc", "val/perplexity"):
        assert resumed[key] == whole[key], key  # same data order, masks and dropout: bit for bit on CPU
    assert not list((root / "killed" / "ckpt").iterdir())  # finished runs clean up their checkpoints
    from mlflow.tracking import MlflowClient

    run = MlflowClient(env["MLFLOW_TRACKING_URI"]).get_run(resumed["mlflow_run_id"])
    assert run.data.metrics["train/loss"] > 0  # the resumed run continued the run it started


@pytest.mark.slow  # a whole stage end to end: the slow marker, which CI runs too
def test_a_wall_clock_budget_stops_training_and_is_recorded(small_data):
    root, paths = small_data
    r = _pretrain_here(root, paths, "budget", "trainer.max_steps=100000", "trainer.max_time=00:00:00:03")
    assert r.returncode == 0, r.stderr[-2000:]
    metrics = json.loads((root / "budget" / "metrics" / "pretrain.json").read_text())
    assert metrics["stopped_by"] == "max_time" and 0 < metrics["steps"] < 100000
    assert metrics["train_seconds"] < 30


def test_a_checkpoint_written_before_the_model_configs_moved_still_resumes(tmp_path, monkeypatch):
    """A checkpoint's hyperparameters name BertConfig by the module it lived in when it was written
    (``pipeline.model.config`` until the configs moved): read with ``weights_only=True`` all the same."""
    import sys

    import pipeline.model_config as model_config_module
    from pipeline.pretrain.checkpoints import checkpoint_step

    with monkeypatch.context() as m:  # pickle as the old code did
        m.setitem(sys.modules, "pipeline.model.config", model_config_module)
        m.setattr(BertConfig, "__module__", "pipeline.model.config")
        torch.save({"state_dict": {}, "global_step": 7, "hyper_parameters": {"config": BertConfig(vocab_size=100)}},
                   tmp_path / "last.ckpt")
    assert b"pipeline.model.config" in (tmp_path / "last.ckpt").read_bytes()
    assert checkpoint_step(tmp_path / "last.ckpt") == 7


def test_a_non_finite_loss_stops_with_a_clear_message_and_keeps_the_last_checkpoint(small_data):
    root, paths = small_data
    r = _pretrain_here(root, paths, "nan", "trainer.max_steps=200", "trainer.checkpoint_every_n_steps=1",
                       "optim.lr=1e12", "optim.warmup_ratio=0.0", "optim.gradient_clip_val=1e30")
    assert r.returncode == 2, r.stderr[-2000:]
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("error: pretrain:") and "training stopped" in line and "ckpt" in line, line
    ckpts = list((root / "nan" / "ckpt").glob("*/last.ckpt"))
    assert len(ckpts) == 1
    state = torch.load(ckpts[0], map_location="cpu", weights_only=True)
    assert all(torch.isfinite(v).all() for v in state["state_dict"].values() if v.is_floating_point())
    assert not (root / "nan" / "out").exists()


def test_pretraining_starts_from_a_hugging_face_folder(small_data, tmp_path):
    root, paths = small_data
    vocab = sum(1 for _ in open(root / "tokenizer" / "vocab.txt", encoding="utf-8"))
    torch.manual_seed(3)
    hf = transformers.BertForPreTraining(transformers.BertConfig(
        vocab_size=vocab, hidden_size=48, num_hidden_layers=1, num_attention_heads=3, intermediate_size=96,
        max_position_embeddings=128))
    hf.save_pretrained(tmp_path / "hf")
    cfg = compose(["experiment=tiny", f"model.init_from={tmp_path / 'hf'}"])
    config = model_config(cfg, vocab)
    assert (config.hidden_size, config.num_attention_heads) == (48, 3)  # the folder's config wins
    with pytest.raises(Exception, match="vocab_size"):
        model_config(cfg, vocab + 1)
    r = _pretrain_here(root, paths, "init", f"model.init_from={tmp_path / 'hf'}", "trainer.max_steps=2",
                       "trainer.val_check_interval=1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "starting from the weights in" in r.stdout + r.stderr
    exported = json.loads((root / "init" / "out" / "hf" / "config.json").read_text())
    assert exported["hidden_size"] == 48
    assert math.isfinite(json.loads((root / "init" / "metrics" / "pretrain.json").read_text())["val/loss"])


def test_pretraining_under_bf16_mixed_with_the_fused_optimiser_and_clipping(small_data):
    """experiment=bert_base's settings (bf16-mixed, fused AdamW, gradient clipping) train: Lightning alone
    refuses to clip for a fused optimiser under any mixed precision."""
    root, paths = small_data
    r = _pretrain_here(root, paths, "bf16", "runtime.precision=bf16-mixed", "runtime.fused_optimizer=true",
                       "trainer.max_steps=3", "trainer.val_check_interval=3")
    assert r.returncode == 0, r.stderr[-2000:]
    metrics = json.loads((root / "bf16" / "metrics" / "pretrain.json").read_text())
    assert metrics["steps"] == 3 and math.isfinite(metrics["val/loss"])


def test_the_fused_optimiser_changes_speed_not_results():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    models = [BertForPreTraining(cfg) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    optim = dict(name="adamw", lr=1e-3, betas=[0.9, 0.999], eps=1e-6, weight_decay=0.01, warmup_ratio=0.1,
                 schedule="linear", decay_ratio=1.0)
    opts = [build_optimizer(m, optim, 10, fused=f)["optimizer"] for m, f in zip(models, (True, False))]
    ids = torch.randint(5, 200, (4, 16))
    masked = torch.rand(4, 16) < 0.2
    for _ in range(5):
        for m, o in zip(models, opts):
            pretraining_loss(m(ids, masked_positions=masked), ids[masked], torch.zeros(4, dtype=torch.long))[0].backward()
            o.step()
            o.zero_grad()
    for (name, a), b in zip(models[0].named_parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5, msg=name)


def test_length_grouped_batches_cut_padding_and_cover_each_share_once():
    import numpy as np

    from pipeline.data.datamodule import LengthGroupedBatches

    rng = np.random.default_rng(0)
    lengths = np.where(rng.random(5000) < 0.1, rng.integers(10, 128, 5000), 128)  # 10% short, as short targets
    shares = []
    for rank in range(2):
        sampler = LengthGroupedBatches(lengths, batch_size=32, seed=3, rank=rank, world=2)
        batches = list(sampler)
        assert len(batches) == len(sampler) == 2500 // 32 and all(len(b) == 32 for b in batches)
        flat = [i for b in batches for i in b]
        assert len(flat) == len(set(flat))
        shares.append(set(flat))
        padded = sum(32 * lengths[b].max() for b in batches)
        grouped_padding = 1 - lengths[flat].sum() / padded
        shuffled = rng.permutation(flat).reshape(-1, 32)
        random_padding = 1 - lengths[flat].sum() / sum(32 * lengths[b].max() for b in shuffled)
        assert grouped_padding < 0.4 * random_padding, (grouped_padding, random_padding)  # measured: 1.2% vs 4.7%
        assert list(LengthGroupedBatches(lengths, 32, 3, rank, 2)) == batches  # seeded
        sampler.set_epoch(1)
        assert list(sampler) != batches  # a fresh order each epoch
    assert not shares[0] & shares[1]


def test_pretraining_with_length_grouped_batches(small_data):
    root, paths = small_data
    r = _pretrain_here(root, paths, "grouped", "trainer.max_steps=12", "trainer.val_check_interval=6",
                       "trainer.length_grouped=true")
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((root / "grouped" / "metrics" / "pretrain.json").read_text())
    assert m["steps"] == 12 and m["val/loss"] > 0


def _blimp_folder(folder: Path) -> Path:
    """Two hand-made paradigms in BLiMP's file format."""
    folder.mkdir(parents=True, exist_ok=True)
    pairs = {"agreement_a": [("the man is here .", "the man are here ."), ("the sons are good .", "the sons is good .")],
             "order_b": [("and god said .", "said god and ."), ("the light was good .", "good the was light .")]}
    for uid, rows in pairs.items():
        with open(folder / f"{uid}.jsonl", "w", encoding="utf-8") as f:
            for i, (good, bad) in enumerate(rows):
                f.write(json.dumps({"sentence_good": good, "sentence_bad": bad, "field": "syntax", "UID": uid,
                                    "linguistics_term": "agreement" if uid.startswith("agr") else "order",
                                    "pairID": str(i)}) + "\n")
    return folder


@pytest.mark.slow  # a whole stage end to end: the slow marker, which CI runs too
def test_blimp_along_a_baseline_run_is_logged_at_each_validation_and_changes_no_training(small_data, tmp_path):
    root, paths = small_data
    extra = ["trainer.max_steps=6", "trainer.val_check_interval=3", "tracking.log_model=false"]
    along = [f"zero_shot.along.data={_blimp_folder(tmp_path / 'blimp')}", "zero_shot.along.pairs=1"]
    for name, more in (("plain", []), ("along", [*along, "variant=baseline"])):  # as the DVC stage names it
        r = _pretrain_here(root, paths, name, *extra, *more)
        assert r.returncode == 0, r.stderr[-2000:]
    metrics = {n: json.loads((root / n / "metrics" / "pretrain.json").read_text()) for n in ("plain", "along")}
    for key in ("val/loss", "val/mlm_acc", "fixed/acc_masked", "fixed/loss_masked"):
        assert metrics["along"][key] == metrics["plain"][key], key  # scoring draws nothing and trains nothing
    curves = {n: list(csv.DictReader(open(root / n / "plots" / "pretrain_fixed.csv"))) for n in ("plain", "along")}
    assert [r["step"] for r in curves["along"]] == [r["step"] for r in curves["plain"]]
    scores = [float(r["blimp"]) for r in curves["along"]]
    assert len(scores) == len(curves["plain"]) and all(s in (0.0, 0.5, 1.0) for s in scores)  # 2 paradigms x 1 pair
    blimp = validate(compose([f"zero_shot.data={tmp_path / 'blimp'}", "zero_shot.pairs=1"])).zero_shot
    assert scores[-1] == score_folder(root / "along" / "out" / "hf", blimp).summary()["overall"]  # as the export scores
    assert "blimp" not in curves["plain"][0]
    nsp = [float(r["nsp_acc"]) for r in curves["plain"]]  # the NSP head on the fixed set's pairs, at every validation
    assert len(nsp) == len(curves["plain"]) and all(0 <= a <= 1 for a in nsp)
    assert nsp[-1] == pytest.approx(metrics["plain"]["fixed/nsp_acc"], abs=1e-6)
    settings = validate(compose([*along])).zero_shot
    tok = load_tokenizer(root / "tokenizer")
    assert along_pretraining(settings, architecture("bert").scorer, tok, baseline=False) is None  # the baseline's only
    assert along_pretraining(validate(compose()).zero_shot, architecture("bert").scorer, tok, baseline=True) is None


# --------------------------------------------------------------------------- #
# The learning-rate sweep: pilots, a diverging rate, the full run at the best
# --------------------------------------------------------------------------- #
@pytest.mark.slow  # a whole stage end to end: the slow marker, which CI runs too
def test_a_sweep_picks_the_better_rate_and_records_a_diverging_one(small_data):
    """Pilots of the baseline at a rate too small to move, a working one and one that diverges (a NaN loss):
    each is a pilot.json, the diverged one too, and the full run trains at the working rate and says why."""
    root, paths = small_data
    sweep = "grid.sweep={rows:[baseline],lrs:[1e-07,0.003,1e12],fraction:0.5}"
    extra = ["trainer.max_steps=40", "trainer.val_check_interval=20", "optim.warmup_ratio=0.0",
             "optim.gradient_clip_val=1e30", sweep]  # no clipping: 1e12 leaves the finite numbers
    folder = root / "swept" / "metrics" / "sweeps" / "baseline"
    for lr in ("1e-07", "0.003", "1e12"):
        r = run_stage_here("pilot", *_pretrain_overrides(root, paths, "swept", *extra, f"pilot_lr={lr}"),
                           env=_env(root))  # the pilot stage: one folder a rate
        assert r.returncode == 0, r.stderr[-2000:]  # a diverging pilot is a result, not a failure
    assert sorted(p.name for p in folder.iterdir()) == ["lr-1e-7", "lr-1e12", "lr-3e-3"]
    pilots = {lr: json.loads((folder / f"lr-{lr}" / "pilot.json").read_text()) for lr in ("1e-7", "3e-3", "1e12")}
    assert pilots["1e12"]["diverged"] and pilots["1e12"]["score"] is None and "loss" in pilots["1e12"]["diverged_because"]
    assert not pilots["3e-3"]["diverged"] and pilots["3e-3"]["steps"] == 20  # half of the 40 steps
    assert pilots["3e-3"]["score"] < pilots["1e-7"]["score"]
    assert (folder / "lr-3e-3" / "pretrain_fixed.csv").is_file() and not (root / "swept" / "out").exists()
    r = _pretrain_here(root, paths, "swept", *extra)
    assert r.returncode == 0, r.stderr[-2000:]
    metrics = json.loads((root / "swept" / "metrics" / "pretrain.json").read_text())
    assert metrics["steps"] == 40 and metrics["lr_sweep"]["chosen_lr"] == 0.003 and metrics["lr_sweep"]["fraction"] == 0.5
    assert [p["diverged"] for p in metrics["lr_sweep"]["pilots"]] == [False, False, True]
    from mlflow.tracking import MlflowClient

    run = MlflowClient(_env(root)["MLFLOW_TRACKING_URI"]).get_run(metrics["mlflow_run_id"])
    assert float(run.data.params["optim.lr"]) == 0.003  # what the run trained at, in its recorded settings
    pilot_run = MlflowClient(_env(root)["MLFLOW_TRACKING_URI"]).get_run(pilots["1e12"]["mlflow_run_id"])
    assert pilot_run.data.tags["kind"] == "pilot" and pilot_run.data.tags["stopped_by"] == "diverged"


def test_a_swept_run_without_its_pilots_says_which_file_is_missing(small_data):
    root, paths = small_data
    r = _pretrain_here(root, paths, "unswept", "grid.sweep={rows:[baseline],lrs:[0.001,0.003],fraction:0.5}")
    assert r.returncode == 2
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("error: pretrain:") and "sweeps/baseline/lr-1e-3/pilot.json not found" in line, line
    assert not (root / "unswept" / "out").exists()
