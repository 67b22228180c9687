"""Ablation variants and grids: every variant composes to a valid run, and DVC and Hydra agree on it."""
from __future__ import annotations

import pytest
import yaml
from omegaconf import OmegaConf

from conftest import ROOT
from pipeline.config import FINETUNE_MODES, compose, validate
from pipeline.errors import ConfigError
from pipeline.grid import apply_variant, data_overrides, find_variant

CFG = compose()
GRIDS = sorted(p.stem for p in (ROOT / "conf" / "grid").glob("*.yaml"))
ALL_VARIANTS = sorted(v for fam in CFG.family.values() for v in fam.variants)


@pytest.mark.parametrize("name", ALL_VARIANTS)
def test_every_variant_is_a_valid_run_with_its_own_outputs(name):
    cfg = apply_variant(OmegaConf.merge(CFG, {"variant": name}), "pretrain")
    validate(cfg)
    _, spec = find_variant(CFG, name)
    for item in spec.set:
        key, value = item.split("=", 1)
        assert OmegaConf.select(cfg, key) == yaml.safe_load(value), item
    assert cfg.paths.pretrain == f"models/variants/{name}" and cfg.paths.metrics == f"metrics/variants/{name}"
    assert cfg.paths.pairs == (f"data/variants/{name}" if data_overrides(list(spec.set)) else "data/pairs")
    if data_overrides(list(spec.set)):
        data = apply_variant(OmegaConf.merge(CFG, {"variant": name}), "make_pairs")
        validate(data)
        assert data.paths.pairs == cfg.paths.pairs and data.pairs == cfg.pairs
    ft = apply_variant(OmegaConf.merge(CFG, {"variant": name}), "finetune")
    assert ft.paths.pretrain == cfg.paths.pretrain and list(ft.finetune.modes) == list(CFG.grid.finetune.modes)


def test_variant_changes_only_what_it_names():
    cfg = apply_variant(OmegaConf.merge(CFG, {"variant": "mask_ratio_40"}), "pretrain")
    before, after = OmegaConf.to_container(CFG), OmegaConf.to_container(cfg)
    assert after["masking"] == {**before["masking"], "mlm_probability": 0.4, "max_predictions_per_seq": None}
    for group in ("model", "objective", "optim", "trainer", "pairs", "finetune"):
        assert after[group] == before[group], group


@pytest.mark.parametrize("grid", GRIDS)
def test_grids_are_consistent_with_the_catalogue(grid):
    cfg = compose([f"grid={grid}"])
    for name, spec in cfg.grid.pretrain.items():
        assert spec == find_variant(cfg, name)[1], name
        # a variant with its own examples has a make_pairs stage, and only such a variant
        assert (name in cfg.grid.data) == bool(data_overrides(list(spec.set))), name
    assert set(cfg.grid.data) <= set(cfg.grid.pretrain)
    assert set(cfg.grid.families) <= set(cfg.family) and set(cfg.grid.finetune.modes) <= set(FINETUNE_MODES)
    for fam in cfg.grid.families:
        for row in cfg.family[fam].rows:
            assert row.get("mode") in FINETUNE_MODES or row.variant == "baseline" or find_variant(cfg, row.variant)
        columns = [c for block in cfg.family[fam].paper for c in block.columns]
        assert len(columns) == len(set(columns)), fam  # one table row of ours shows every source's columns
        for row in cfg.family[fam].rows:
            if row.get("paper"):
                assert any(row.paper in block.rows for block in cfg.family[fam].paper), (fam, row.paper)


def test_the_full_grid_runs_every_variant_of_the_catalogue():
    assert sorted(compose(["grid=full"]).grid.pretrain) == ALL_VARIANTS
    assert sorted(compose(["grid=full"]).grid.families) == sorted(CFG.family)


def test_dvc_stage_and_hand_run_compose_the_same_variant(tmp_path):
    """`dvc repro`'s pretrain_variant@X reads params.yaml; a person composes conf/: same settings."""
    params = OmegaConf.load(ROOT / "params.yaml")
    via_dvc = apply_variant(OmegaConf.merge(params, {"variant": "layers_4"}), "pretrain")
    by_hand = apply_variant(compose(["variant=layers_4"]), "pretrain")
    assert OmegaConf.to_container(via_dvc) == OmegaConf.to_container(by_hand)


@pytest.mark.parametrize("variant, stage, fragment", [
    ("mask_ratio_99", "pretrain", "variant='mask_ratio_99' is not defined in any conf/family file: expected one of"),
    ("nsp_off", "make_pairs", "it changes no pairs.* setting"),
    ("nsp_off", "report", "the report stage has no variants"),
])
def test_bad_variant_is_a_clear_error(variant, stage, fragment):
    with pytest.raises(ConfigError) as e:
        apply_variant(OmegaConf.merge(CFG, {"variant": variant}), stage)
    assert fragment in str(e.value)


def test_variant_with_a_typo_in_its_settings_is_refused():
    base = OmegaConf.create(OmegaConf.to_container(CFG))  # not in struct mode: the test adds a variant
    cfg = OmegaConf.merge(base, {"variant": "bad", "family": {"mask_ratio": {"variants": {
        "bad": {"set": ["masking.mlm_probabilty=0.3"], "pairs": "data/pairs"}}}}})
    with pytest.raises(ConfigError, match="set entry 'masking.mlm_probabilty=0.3' is not allowed"):
        apply_variant(cfg, "pretrain")
    cfg = OmegaConf.merge(base, {"variant": "bad", "family": {"mask_ratio": {"variants": {
        "bad": {"set": ["pairs.format=full_sentences"], "pairs": "data/pairs"}}}}})
    with pytest.raises(ConfigError, match="expected 'data/variants/bad'"):
        apply_variant(cfg, "pretrain")
