"""conf/ is the single source of truth: params.yaml agrees with it, bad values fail early."""
from __future__ import annotations

import yaml
import pytest
from omegaconf import OmegaConf

from pipeline.config import compose, validate
from pipeline.errors import ConfigError

from conftest import ROOT, run_stage, run_stage_here


def test_params_yaml_is_conf_composed():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert params == OmegaConf.to_container(compose(), resolve=True)


def test_every_concern_has_a_group():
    groups = {p.name for p in (ROOT / "conf").iterdir() if p.is_dir()}
    assert {"corpus", "tokenizer", "pairs", "masking", "objective", "model", "optim", "trainer", "task",
            "tracking", "runtime"} <= groups


@pytest.mark.parametrize("override, key", [
    ("masking.mlm_probability=1.5", "masking.mlm_probability=1.5"),
    ("model.hidden_size=129", "model.hidden_size=129"),
    ("masking.keep_prob=0.3", "masking.mask_token_prob + random_token_prob + keep_prob"),
    ("pairs.max_seq_length=256", "pairs.max_seq_length=256"),
    ("tokenizer.vocab_size=4", "tokenizer.vocab_size=4"),
    ("optim.lr=-1", "optim.lr=-1"),
    ("finetune.modes=[pretrained,frozen]", "finetune.modes"),
    ("pairs.format=full_sentences", "pairs.format=full_sentences is not allowed with objective.nsp=true"),
    ("pairs.format=sentences", "pairs.format='sentences'"),
    ("masking.static=maybe", "masking.static='maybe'"),
    ("runtime.num_workers=0", "runtime.num_workers=0"),
    ("runtime.precision=16-mixed", "runtime.precision=16-mixed with runtime.fused_optimizer=true"),
    ("finetune.lrs=[1e-3,0]", "finetune.lrs=[0.001, 0]"),
    ("finetune.lrs=[1e-3,1e-3]", "finetune.lrs=[0.001, 0.001] is not allowed: 0.001 is listed 2 times"),
    ("finetune.feature_lrs=[]", "finetune.feature_lrs=[]"),
    ("finetune.poolings=[cls]", "finetune.poolings=['cls']"),
    ("finetune.tfidf.c=[-1]", "finetune.tfidf.c=[-1]"),
    ("finetune.test_fraction=1.0", "finetune.test_fraction=1.0"),
    ("finetune.control.modes=[tfidf,bow]", "finetune.control.modes[1]='bow'"),
    ("grid.finetune.choose=each", "grid.finetune.choose='each'"),
])
def test_invalid_settings_name_key_and_value(override, key):
    with pytest.raises(ConfigError) as e:
        validate(compose([override]))
    assert key in str(e.value) and "expected" in str(e.value)


def test_demo_and_tiny_configs_are_valid():
    validate(compose())
    validate(compose(["experiment=tiny"]))
    validate(compose(["objective=mlm", "pairs.format=doc_sentences", "masking.static=true"]))


def test_demo_long_is_the_demo_baseline_trained_longer():
    """experiment=demo_long changes the budget only: the demo's model, examples and recipe, three pretraining
    runs of the baseline (no variants), scratch and TF-IDF beside the first, four times the steps; fine-tuned
    with the demo's own recipe (its epochs and seeds)."""
    demo, long = compose(), compose(["experiment=demo_long"])
    validate(long)
    assert list(long.runs) == ["baseline", "baseline-s1", "baseline-s2"]
    assert {"pretrained", "scratch", "tfidf"} <= set(long.finetunes["baseline-word_order"].modes)
    assert long.trainer.max_steps * long.trainer.batch_size >= 4 * demo.trainer.max_steps * demo.trainer.batch_size
    for group in ("model", "pairs", "masking", "objective", "optim", "task", "tokenizer"):
        assert long[group] == demo[group], group
    budget = {"max_steps", "batch_size", "val_check_interval", "checkpoint_every_n_steps"}
    assert {k: v for k, v in long.trainer.items() if k not in budget} == \
        {k: v for k, v in demo.trainer.items() if k not in budget}
    assert long.finetune == demo.finetune


def test_depth_word_order_is_grid_depth_fine_tuned_on_word_order_alone():
    """experiment=depth_word_order is grid=depth's pretraining (the same runs, settings and pilots) with one
    finetune stage per run, on word_order, instead of one per run and demo task."""
    depth, cheap = compose(["grid=depth"]), compose(["experiment=depth_word_order"])
    validate(cheap)
    assert cheap.runs == depth.runs and cheap.pilots == depth.pilots
    assert cheap.task.name == "word_order" and cheap.get("suite") is None
    assert list(cheap.finetunes) == list(depth.runs)
    assert sorted(depth.finetunes) == sorted(f"{run}-{task}" for run in depth.runs
                                             for task in ("word_order", "bible_sections"))


def test_depth_pays_is_grid_depths_pre_ln_rows_at_2_and_12_layers_for_6400_steps():
    """experiment=depth_pays changes the budget only, and runs grid=depth's pre-LayerNorm rows at 2 and 12 layers
    (the same settings) twice each, at the peak rate both chose in its sweep, beside one run of the baseline."""
    demo, depth, pays = compose(), compose(["grid=depth"]), compose(["experiment=depth_pays"])
    validate(pays)
    assert pays.trainer.max_steps == 8 * demo.trainer.max_steps
    for group in ("model", "pairs", "masking", "objective", "optim", "tokenizer"):
        assert pays[group] == demo[group], group
    assert list(pays.runs) == ["baseline", "prenorm_2", "prenorm_2-s1", "prenorm_12", "prenorm_12-s1"]
    for run in ("prenorm_2", "prenorm_12"):
        assert pays.runs[run].set == depth.runs[run].set
    assert pays.get("pilots") in (None, {}) and pays.task.name == "word_order"
    assert list(pays.finetunes) == list(pays.runs)
    hour = compose(["experiment=depth_pays_hour"])  # the same grid cut to fit an hour: only the steps differ
    validate(hour)
    assert hour.trainer.max_steps == 4000 and hour.runs == pays.runs and hour.finetunes == pays.finetunes
    assert {k: v for k, v in hour.trainer.items() if k != "max_steps"} == \
        {k: v for k, v in pays.trainer.items() if k != "max_steps"}


def test_nsp_posed_is_the_demo_with_4_heads_for_6400_steps_and_the_2_head_model_as_a_row():
    """experiment=nsp_posed changes the heads and the budget only; its grid keeps NSP on, off, off with full
    sentences and the demo's 2 heads as rows, each fine-tuned on a single-sentence and a sentence-pair task."""
    demo, posed = compose(), compose(["experiment=nsp_posed"])
    validate(posed)
    assert posed.model.num_attention_heads == 4 and demo.model.num_attention_heads == 2
    assert {k: v for k, v in posed.model.items() if k not in ("name", "num_attention_heads")} == \
        {k: v for k, v in demo.model.items() if k not in ("name", "num_attention_heads")}
    assert posed.trainer.max_steps == 8 * demo.trainer.max_steps
    for group in ("pairs", "masking", "objective", "optim", "tokenizer"):
        assert posed[group] == demo[group], group
    assert list(posed.runs) == ["baseline", "baseline-s1", "baseline-s2", "nsp_off", "nsp_off-s1",
                                "nsp_off_full_sentences", "nsp_off_full_sentences-s1", "nsp_heads_2", "nsp_heads_2-s1"]
    assert "model.num_attention_heads=2" in posed.runs["nsp_heads_2"].set
    assert list(posed.suite.tasks) == ["word_order", "verse_next"]
    assert sorted(posed.finetunes) == sorted(f"{run}-{task}" for run in posed.runs
                                             for task in ("word_order", "verse_next"))


def test_dvc_path_reads_params_yaml():
    """What DVC runs (--config-name from_params) sees exactly params.yaml."""
    r = run_stage("pretrain", "--config-name", "from_params", "--cfg", "job")
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout) == yaml.safe_load((ROOT / "params.yaml").read_text())


def test_a_params_yaml_composed_from_an_older_conf_is_refused(tmp_path):
    """conf/ edited after params.yaml was composed: the fingerprint differs, and a stage stops with one line."""
    import shutil

    from pipeline.config import check_fresh
    from pipeline.conf import conf_hash

    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    before = conf_hash(conf)
    check_fresh(OmegaConf.create({"conf_hash": before}), conf)
    (conf / "trainer" / "demo.yaml").write_text((conf / "trainer" / "demo.yaml").read_text() + "# an edit\n")
    assert conf_hash(conf) != before
    with pytest.raises(ConfigError, match="params.yaml was composed from an older conf/.*dvc exp run"):
        check_fresh(OmegaConf.create({"conf_hash": before}), conf)
    r = run_stage_here("prepare_corpus", "conf_hash=0123456789abcdef", f"paths.corpus={tmp_path / 'corpus'}")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "python -m pipeline.config" in r.stderr, r.stderr
    assert not (tmp_path / "corpus").exists()


def test_stage_does_not_leave_hydra_files(tmp_path):
    r = run_stage("prepare_corpus", "--cfg", "job", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert not (ROOT / "outputs").exists() and not (ROOT / ".hydra").exists()


@pytest.mark.parametrize("task", sorted(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml")))
def test_every_task_config_composes_to_a_loader(task):
    from hydra.utils import get_method

    cfg = compose([f"task={task}"])
    validate(cfg)
    assert callable(get_method(cfg.task.data._target_))


def test_the_paper_s_fine_tuning_grid_is_a_hydra_sweep_choosing_its_learning_rate_on_dev():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = hydra_compose("config", overrides=["experiment=finetune_grid"], return_hydra_config=True)
    grid = cfg.hydra.sweeper.params
    assert grid["finetune.batch_size"] == "16,32" and grid["finetune.epochs"] == "2,3,4"
    assert list(cfg.finetune.lrs) == [5e-5, 3e-5, 2e-5]
    validate(compose(["experiment=finetune_grid"]))


@pytest.mark.parametrize("overrides, message", [
    (["finetune.seeds=[0,1,0]"], "finetune.seeds=[0, 1, 0] is not allowed: 0 is listed 2 times; expected distinct seeds"),
    (["finetune.modes=[pretrained,tfidf,pretrained]"], "finetune.modes=['pretrained', 'tfidf', 'pretrained'] is "
                                                       "not allowed: 'pretrained' is listed 2 times"),
    (["grid.pretrain=[nsp_off,mask_ratio_40,nsp_off]"], "grid.pretrain=['nsp_off', 'mask_ratio_40', 'nsp_off'] is "
                                                        "not allowed: 'nsp_off' is listed 2 times"),
    (["suite=table6", "+suite.modes.sst2=[pretrained,pretrained]"], "suite.modes.sst2=['pretrained', 'pretrained'] "
                                                                    "is not allowed: 'pretrained' is listed 2 times"),
])
def test_a_run_listed_twice_is_refused_naming_key_and_value(overrides, message):
    """Seeds, modes and variants are runs: a repeat would run the same thing twice and count it as two."""
    with pytest.raises(ConfigError) as e:
        validate(compose(overrides))
    assert str(e.value).startswith(message), e.value


def test_check_conf_refuses_invalid_settings_before_any_stage(tmp_path):
    """The check_conf stage: a params.yaml as `dvc exp run -S finetune.seeds=[3,3]` composes it is refused."""
    from pipeline.check_conf import check_params

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(OmegaConf.to_container(compose(["finetune.seeds=[3,3]"]))))
    with pytest.raises(ConfigError, match=r"finetune.seeds=\[3, 3\] is not allowed: 3 is listed 2 times"):
        check_params(params)
    params.write_text(yaml.safe_dump(OmegaConf.to_container(compose())))
    check_params(params)
