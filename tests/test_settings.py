"""Every config group's settings object: checked once, at start-up, by its owner (pipeline/settings/).

Each group refuses NaN and infinity and a key it does not have, in one line naming the key; the checks
that used to run after compute (the report's families, a make_pairs share, the batch split over devices)
fail at validation, so in the check_conf stage and at each stage's start; the values come from conf/ only.
"""
from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest
import yaml
from omegaconf import OmegaConf

from conftest import ROOT, run_stage_here
from pipeline.check_conf import check_params
from pipeline.config import compose, validate
from pipeline.errors import ConfigError
from pipeline.settings import GROUPS, PRECISIONS, ModelSettings
from pipeline.values import POSITIVE, PROBABILITY, integer, is_number

CONF = ROOT / "conf"


def _refused(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as e:
        validate(compose(overrides))
    message = str(e.value)
    assert "\n" not in message
    return message


# A float setting of every group that has one, and for the groups of counts a count given as NaN or infinity.
NOT_FINITE = [
    (["corpus.valid_fraction=nan"], "corpus.valid_fraction=nan"),
    (["tokenizer.vocab_size=inf"], "tokenizer.vocab_size=inf"),
    (["pairs.short_seq_prob=nan"], "pairs.short_seq_prob=nan"),
    (["eval_set.mlm_probability=inf"], "eval_set.mlm_probability=inf"),
    (["masking.random_token_prob=nan"], "masking.random_token_prob=nan"),
    (["model.hidden_dropout_prob=nan"], "model.hidden_dropout_prob=nan"),
    (["+model.layer_norm_eps=inf"], "model.layer_norm_eps=inf"),   # "a positive number" alone lets inf through
    (["model=elmo", "objective=elmo", "model.predict_fraction=inf"], "model.predict_fraction=inf"),
    (["optim.lr=inf"], "optim.lr=inf"),
    (["optim.eps=nan"], "optim.eps=nan"),
    (["optim.betas=[0.9,nan]"], "optim.betas=[0.9, nan]"),
    (["trainer.max_steps=nan"], "trainer.max_steps=nan"),
    (["finetune.weight_decay=inf"], "finetune.weight_decay=inf"),
    (["finetune.gradient_clip_val=nan"], "finetune.gradient_clip_val=nan"),
    (["task.max_seq_length=inf"], "task.max_seq_length=inf"),
    (["suite=table6", "suite.tasks.sst2.max_seq_length=nan"], "suite.tasks.sst2.max_seq_length=nan"),
    (["grid.seeds.baseline=inf"], "grid.seeds.baseline=inf"),
    (["report.confidence=nan"], "report.confidence=nan"),
    (["probe.occurrences=inf"], "probe.occurrences=inf"),
    (["runtime.num_workers=nan"], "runtime.num_workers=nan"),
    (["seed=inf"], "seed=inf"),
]


@pytest.mark.parametrize("overrides, key", NOT_FINITE, ids=[k for _, k in NOT_FINITE])
def test_nan_and_infinity_are_refused_in_every_group(overrides, key):
    message = _refused(overrides)
    assert message.startswith(f"{key} is not allowed: expected "), message


@pytest.mark.parametrize("group", [g for g in GROUPS if g not in ("run", "suite")])
def test_a_key_a_group_does_not_have_is_named_in_one_line(group):
    message = _refused([f"+{group}.colour=red"])
    assert message.startswith(f"{group}.colour is not a setting"), message
    assert "expected one of" in message


@pytest.mark.parametrize("overrides, key", [
    (["suite=table6", "+suite.colour=red"], "suite.colour"),
    (["suite=table6", "+suite.tasks.mrpc.colour=red"], "suite.tasks.mrpc.colour"),
    (["suite=table6", "+suite.columns.0.colour=red"], "suite.columns[0].colour"),
    (["+grid.seeds.colour=red"], "grid.seeds.colour"),
    (["+corpus.probe.colour=red"], "corpus.probe.colour"),
])
def test_a_key_a_nested_group_does_not_have_is_named_in_full(overrides, key):
    assert _refused(overrides).startswith(f"{key} is not a setting"), key


def test_a_model_setting_of_another_architecture_is_named_with_the_architecture():
    message = _refused(["+model.lstm_size=64"])
    assert message.startswith("model.lstm_size is not a setting of model.architecture=bert: expected one of"), message


def test_a_missing_key_is_named():
    plain = OmegaConf.to_container(compose())
    del plain["pairs"]["dupe_factor"]
    with pytest.raises(ConfigError, match=r"^pairs.dupe_factor is missing: expected an integer >= 1$"):
        validate(OmegaConf.create(plain))


def test_a_stage_names_an_unknown_key_in_one_line_before_any_work(tmp_path):
    r = run_stage_here("prepare_corpus", "+corpus.colour=red", f"paths.corpus={tmp_path / 'corpus'}",
                  f"paths.metrics={tmp_path / 'metrics'}")
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines() == ["error: prepare_corpus: corpus.colour is not a setting: expected one "
                                             "of name, valid_fraction, source, probe"]
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------- checks that used to run late


@pytest.mark.parametrize("overrides, message", [
    # the report stage, after every run of the grid
    (["grid.families=[pretraining,nope]"], "grid.families: ['nope'] not defined"),
    # make_pairs, after loading the tokenizer
    (["runtime.parts=2", "runtime.part=2"], "runtime.part=2 is not allowed: expected an integer in [0, runtime.parts=2)"),
    # pretraining, after the data module was built
    (["trainer.batch_size=100", "trainer.accumulate_grad_batches=3"],
     "trainer.batch_size=100 is not allowed: expected a multiple of devices x nodes x accumulate_grad_batches = 3"),
    (["trainer.batch_size=128", "trainer.devices=[0,1,2]", "trainer.accelerator=gpu"],
     "trainer.batch_size=128 is not allowed: expected a multiple of devices x nodes x accumulate_grad_batches = 3"),
    (["trainer=ddp", "trainer.num_nodes=3"], "trainer.batch_size=16 is not allowed: expected a multiple of nodes x "
                                             "accumulate_grad_batches (and of the devices trainer.devices=auto finds) = 3"),
])
def test_the_checks_that_ran_after_compute_fail_at_validation(overrides, message):
    assert _refused(overrides).startswith(message)


@pytest.mark.parametrize("overrides, message", [
    (["report.detect=0"], "report.detect=0 is not allowed: expected points in (0, 100], e.g. 10"),
    (["report.detect_tasks.bible_sections=-5"],
     "report.detect_tasks.bible_sections=-5 is not allowed: expected points in (0, 100], e.g. 10"),
    (["+report.detect_tasks.word_order=ten"],
     "report.detect_tasks.word_order='ten' is not allowed: expected points in (0, 100], e.g. 10"),
])
def test_a_detection_target_out_of_range_is_named_with_its_task(overrides, message):
    assert _refused(overrides) == message


def _unknown_family(plain: dict) -> None:  # a params.yaml edited by hand (composing conf/ refuses it already)
    plain["grid"]["families"] = ["pretraining", "nope"]


def _bad_variant(plain: dict) -> None:  # a variant's bad setting, which only its own stages would read
    plain["family"]["mask_ratio"]["mask_ratio_150"] = ["masking.mlm_probability=1.5"]
    plain["grid"]["pretrain"] = ["mask_ratio_40", "mask_ratio_150"]


@pytest.mark.parametrize("edit, message", [
    (_unknown_family, r"grid.families: \['nope'\] not defined"),
    (_bad_variant, r"^masking.mlm_probability=1.5 is not allowed"),
])
def test_the_check_conf_stage_refuses_them_and_checks_every_variant_of_the_grid(tmp_path, edit, message):
    """Before the baseline's compute: a late check, and a variant's bad setting, not at the variant's own stages."""
    plain = OmegaConf.to_container(compose())
    edit(plain)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(plain))
    with pytest.raises(ConfigError, match=message):
        check_params(params)


def test_make_pairs_refuses_a_share_beyond_the_machines_before_any_work(tmp_path):
    r = run_stage_here("make_pairs", "runtime.parts=2", "runtime.part=5", f"paths.pairs={tmp_path / 'p'}",
                  f"paths.metrics={tmp_path / 'm'}")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: make_pairs: runtime.part=5 is not allowed: expected an integer in [0, runtime.parts=2)"], r.stderr
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------- the values come from conf/


def test_no_setting_has_a_default_in_code():
    """Only a suite column's optional entries (metric, mode, paper) may be left out, as None."""
    for cls in {c for c in GROUPS.values()} | {f.metadata[k] for c in GROUPS.values() for f in dataclasses.fields(c)
                                                for k in ("group", "each") if k in f.metadata}:
        for f in dataclasses.fields(cls):
            optional = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            assert not optional or (cls.KEY == "suite.columns" and f.default is None), (cls.__name__, f.name)


def test_make_pairs_takes_its_settings_and_seed_from_the_caller():
    from pipeline.data.pairs import make_examples, write_examples

    for fn in (make_examples, write_examples):
        params = inspect.signature(fn).parameters
        assert params["pairs"].default is inspect.Parameter.empty and params["seed"].default is inspect.Parameter.empty


def _defaults(fn) -> dict:
    if dataclasses.is_dataclass(fn):
        return {f.name: f.default for f in dataclasses.fields(fn) if f.default is not dataclasses.MISSING}
    return {k: p.default for k, p in inspect.signature(fn).parameters.items() if p.default is not p.empty}


def test_the_defaults_left_in_code_are_conf_s():
    """The computing functions' and objects' own defaults, where they have any, say what conf/ says."""
    from pipeline.data.eval_set import EvalSetConfig
    from pipeline.data.masking import MaskingConfig
    from pipeline.data.wordpiece import train_wordpiece
    from pipeline.report.stats import compare

    cfg = compose()
    for fn, group in ((train_wordpiece, "tokenizer"), (MaskingConfig, "masking"), (EvalSetConfig, "eval_set"),
                      (compare, "report")):
        shared = {k: v for k, v in _defaults(fn).items() if k in cfg[group]}
        assert shared and shared == {k: cfg[group][k] for k in shared}, (fn.__name__, group)


@pytest.mark.parametrize("group", [g for g in GROUPS if (CONF / g).is_dir()])
def test_every_preset_of_a_group_reads_into_its_settings(group):
    """Every conf/<group>/*.yaml has exactly the keys its settings object declares."""
    for preset in sorted((CONF / group).glob("*.yaml")):
        cfg = compose([f"{group}={preset.stem}"])
        settings = GROUPS[group].read(cfg[group])
        assert settings.KEY == group


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_every_experiment_is_valid(experiment):
    validate(compose([f"experiment={experiment}"]))


def test_the_model_settings_leave_the_architecture_s_values_to_its_config():
    settings = ModelSettings.read(compose(["model=word2vec", "objective=cbow"]).model)
    assert settings.architecture == "word2vec" and settings.shape == {"embedding_size": 128, "window": 5,
                                                                       "negatives": 5}


def test_the_precisions_are_lightning_s():
    from lightning.fabric.connector import _PRECISION_INPUT

    names = {str(v) for literal in typing.get_args(_PRECISION_INPUT) for v in typing.get_args(literal)}
    assert set(PRECISIONS) == names


# ------------------------------------------------------------------------------------------------ the numbers


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), True, "1", None])
def test_a_number_is_finite_and_not_a_boolean(value):
    assert not is_number(value)
    for kind in (POSITIVE, PROBABILITY, integer(0)):
        assert not kind.allows(value)
        with pytest.raises(ConfigError, match=r"^x\.y=.* is not allowed: expected "):
            kind.check("x.y", value)


@pytest.mark.parametrize("overrides, fragment", [
    (["objective=mlm", "objective.nsp_weight=2.0"],
     "objective.nsp_weight=2.0 is not allowed with objective.nsp=false: expected null"),
    (["objective.nsp_weight=null"], "objective.nsp_weight=null is not allowed with objective.nsp=true"),
    (["objective.nsp_weight=-1"], "objective.nsp_weight=-1"),
])
def test_an_nsp_setting_without_nsp_is_refused_naming_the_key(overrides, fragment):
    with pytest.raises(ConfigError) as e:
        validate(compose(overrides))
    assert fragment in str(e.value) and "\n" not in str(e.value)
