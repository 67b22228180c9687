"""Ablation variants and grids: every variant composes to a valid run, and DVC and Hydra agree on it."""
from __future__ import annotations

import re

import pytest
import yaml
from omegaconf import OmegaConf

from conftest import ROOT
from pipeline.check_conf import check_params
from pipeline.config import compose, validate
from pipeline.errors import ConfigError
from pipeline.names import MODES, SEED_FREE
from pipeline.report.results import load_families
from pipeline.variants import BASELINE, apply_variant, catalogue, data_overrides, find_variant, run_name

CFG = compose()
GRIDS = sorted(p.stem for p in (ROOT / "conf" / "grid").glob("*.yaml"))
ALL_VARIANTS = sorted(catalogue(CFG))
TABLES = sorted(p.stem for p in (ROOT / "pipeline" / "report" / "families").glob("*.yaml"))


@pytest.mark.parametrize("name", ALL_VARIANTS)
def test_every_variant_is_a_valid_run_with_its_own_outputs(name):
    cfg = apply_variant(OmegaConf.merge(CFG, {"variant": name}), "pretrain")
    validate(cfg)
    for item in find_variant(CFG, name):
        key, value = item.split("=", 1)
        if "." in key:
            assert OmegaConf.select(cfg, key) == yaml.safe_load(value), item
        else:  # group=choice: the group is conf/'s preset, as Hydra composes it
            assert cfg[key] == compose([item])[key], item
    assert cfg.paths.pretrain == f"models/variants/{name}" and cfg.paths.metrics == f"metrics/variants/{name}"
    own = data_overrides(find_variant(CFG, name))
    assert cfg.paths.pairs == (f"data/variants/{name}" if own else "data/pairs")
    if own:
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


# the grids of the most runs (full: every variant, half a minute; lineage, recipe, depth and nsp: 4 to 9 s each) run
# with the slow checks; every other grid here
SLOW_GRIDS = ("full", "lineage", "recipe", "depth", "nsp")


@pytest.mark.parametrize("grid", [pytest.param(g, marks=pytest.mark.slow) if g in SLOW_GRIDS else g for g in GRIDS])
def test_runs_of_every_grid_agree_with_what_each_stage_writes(grid):
    """The generated `runs` and `examples` (what dvc.yaml iterates over) name the folders the stages use."""
    cfg = compose([f"grid={grid}"])
    expected = [run_name(v, k) for v in [BASELINE, *cfg.grid.pretrain]
                for k in range(cfg.grid.seeds.baseline if v == BASELINE else cfg.grid.seeds.variants)]
    assert list(cfg.runs) == expected and len(set(expected)) == len(expected)
    for name, run in cfg.runs.items():
        if run.pretrain_seed > 1:  # runs 2, 3, ... follow run 1's rule: their own folders, the same settings
            first = cfg.runs[run_name(run.variant, 1)]
            assert run.pretrain.endswith(f"-s{run.pretrain_seed}") and run.modes == first.modes
            continue
        hand = OmegaConf.merge(cfg, {"variant": run.variant, "pretrain_seed": run.pretrain_seed})
        by_hand = apply_variant(hand, "pretrain", swept=False)  # (a swept row's rate: test_sweep.py)
        assert {k: run[k] for k in ("pairs", "pretrain", "metrics", "plots")} == \
            {k: by_hand.paths[k] for k in ("pairs", "pretrain", "metrics", "plots")}, name
        assert list(run.set) == ([] if run.variant == BASELINE else find_variant(cfg, run.variant))
        assert list(run.modes) == list(apply_variant(hand, "finetune").finetune.modes)
        if run.pretrain_seed:  # from scratch and TF-IDF do not use the pretrained weights: once per variant
            assert not set(run.modes) & set(SEED_FREE)
    assert len({r.pretrain for r in cfg.runs.values()}) == len(cfg.runs)  # every run its own outputs
    own = [n for n in cfg.grid.pretrain if data_overrides(find_variant(cfg, n))]
    assert list(cfg.examples) == [BASELINE, *own]
    for name in own:
        assert cfg.examples[name].pairs == cfg.runs[name].pairs != cfg.paths.pairs
        assert all(r.pairs == cfg.examples[name].pairs for r in cfg.runs.values() if r.variant == name)
    assert set(cfg.grid.finetune.modes) <= set(MODES)


def test_a_further_pretraining_run_trains_from_its_own_seed_on_the_same_examples():
    cfg = apply_variant(OmegaConf.merge(CFG, {"variant": "mask_ratio_40", "pretrain_seed": 2}), "pretrain")
    assert validate(cfg).run.training_seed == CFG.seed + 2 and cfg.paths.pairs == CFG.paths.pairs
    assert cfg.paths.pretrain == "models/variants/mask_ratio_40-s2"
    base = apply_variant(OmegaConf.merge(CFG, {"pretrain_seed": 1}), "pretrain")
    assert base.paths.pretrain == "models/variants/baseline-s1" and validate(base).run.training_seed == CFG.seed + 1
    with pytest.raises(ConfigError, match="pretrain_seed=1: make_pairs writes the same examples"):
        apply_variant(OmegaConf.merge(CFG, {"pretrain_seed": 1}), "make_pairs")


@pytest.mark.parametrize("grid", GRIDS)
def test_grids_report_families_whose_rows_exist(grid):
    cfg = compose([f"grid={grid}"])
    for fam, spec in load_families(list(cfg.grid.families)).items():
        for row in spec["rows"]:
            assert row.get("mode") in MODES or row["variant"] == BASELINE or find_variant(cfg, row["variant"])
        columns = [c for block in spec["paper"] for c in block["columns"]]
        assert len(columns) == len(set(columns)), fam  # one table row of ours shows every source's columns
        for row in spec["rows"]:
            if row.get("paper"):
                assert any(row["paper"] in block["rows"] for block in spec["paper"]), (fam, row["paper"])


def test_the_full_grid_runs_every_variant_and_reports_every_family():
    """Every variant that changes the default model or recipe (nsp_heads_2 restores the demo's 2 heads in a preset
    with 4: on the default baseline it changes nothing but the name)."""
    cfg = compose(["grid=full"])

    def changes(name: str) -> bool:
        run = apply_variant(OmegaConf.merge(CFG, {"variant": name}), "pretrain")
        return any(run[g] != CFG[g] for g in ("pairs", "masking", "objective", "optim", "trainer")) or \
            {k: v for k, v in run.model.items() if k != "name"} != {k: v for k, v in CFG.model.items() if k != "name"}
    assert sorted(cfg.grid.pretrain) == [v for v in ALL_VARIANTS if changes(v)] == \
        sorted(set(ALL_VARIANTS) - {"nsp_heads_2"})
    assert sorted(cfg.grid.families) == TABLES
    # every variant of the catalogue has a row in its family's table
    rows = {r.get("variant") for spec in load_families(TABLES).values() for r in spec["rows"]}
    assert set(ALL_VARIANTS) <= rows


def test_dvc_stage_and_hand_run_compose_the_same_variant():
    """`dvc repro`'s pretrain@X reads params.yaml; a person composes conf/: same settings."""
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


def test_variants_speak_hydra_s_override_grammar_with_group_choices():
    cfg = apply_variant(OmegaConf.merge(CFG, {"variant": "size_mini"}), "pretrain")
    assert cfg.model.name == "mini" and cfg.model.hidden_size == 256 and cfg.model.num_hidden_layers == 4
    assert OmegaConf.to_container(cfg.masking) == OmegaConf.to_container(CFG.masking)
    ltr = apply_variant(OmegaConf.merge(CFG, {"variant": "ltr"}), "pretrain")
    assert ltr.objective.lm == "left_to_right" and ltr.objective.nsp is False and ltr.objective.name == "ltr"
    base = OmegaConf.create(OmegaConf.to_container(CFG))
    bad = OmegaConf.merge(base, {"variant": "bad", "family": {"depth": {"bad": ["model=enormous"]}}})
    with pytest.raises(ConfigError, match="variant bad: model=enormous is not allowed: expected one of base, demo"):
        apply_variant(bad, "pretrain")


def test_variant_with_a_typo_in_its_settings_is_refused():
    base = OmegaConf.create(OmegaConf.to_container(CFG))  # not in struct mode: the test adds a variant
    cfg = OmegaConf.merge(base, {"variant": "bad", "family": {"mask_ratio": {"bad": ["masking.mlm_probabilty=0.3"]}}})
    with pytest.raises(ConfigError, match="set entry 'masking.mlm_probabilty=0.3' is not allowed"):
        apply_variant(cfg, "pretrain")


def test_a_grid_naming_an_unknown_variant_or_family_is_a_clear_error():
    with pytest.raises(ConfigError, match="variant=.layers_5. is not defined"):
        compose(["grid.pretrain=[layers_5]"])
    with pytest.raises(ConfigError, match=r"grid.families: \['nope'\] not defined"):
        load_families(["nope"])


SUITES = sorted(p.stem for p in (ROOT / "conf" / "suite").glob("*.yaml"))


# one suite here (table 8's), the others with the slow checks (each builds DVC's graph of its grid: 10-30 s)
@pytest.mark.parametrize("suite", [x if x == "table8" else pytest.param(x, marks=pytest.mark.slow) for x in SUITES])
def test_a_suite_gives_each_run_one_finetune_stage_per_task(suite):
    """`finetunes` (what dvc.yaml's finetune stages iterate over): (run, task) pairs whose settings, modes and
    folders are what the stage composes by hand with the same overrides."""
    cfg = compose(["grid=ci", f"suite={suite}"])
    validate(cfg)
    tasks = list(cfg.suite.tasks)
    assert list(cfg.finetunes) == [f"{run}-{t}" for run in cfg.runs for t in tasks]
    families = load_families(list(cfg.grid.families))
    columns = {c.paper for c in cfg.suite.columns if c.get("paper")}
    # the paper's column a suite column sits beside (where it names one) exists in some family
    assert columns <= {c for f in load_families(TABLES).values() for b in f.get("paper") or [] for c in b["columns"]}
    assert families
    for key, ft in cfg.finetunes.items():
        run = cfg.runs[ft.run]
        hand = apply_variant(OmegaConf.merge(cfg, {"variant": ft.variant, "pretrain_seed": ft.pretrain_seed,
                                                   "suite_task": ft.task}), "finetune")
        validate(hand)
        assert hand.paths.metrics == ft.metrics == ft.out == f"{run.metrics}/tasks/{ft.task}", key
        assert hand.paths.pretrain == run.pretrain and hand.task == cfg.suite.tasks[ft.task]
        assert list(hand.finetune.modes) == list(ft.modes)
        own = cfg.suite.modes.get(ft.task)
        expected = list(run.modes) if own is None else [m for m in own if m not in SEED_FREE or m in run.modes]
        assert list(ft.modes) == expected, key
        assert ft.args == f"variant={ft.variant} pretrain_seed={ft.pretrain_seed} suite_task={ft.task}"


def test_without_a_suite_each_run_has_one_finetune_stage_where_it_always_was():
    cfg = compose(["grid=ci", "~suite"])
    assert list(cfg.finetunes) == list(cfg.runs)
    for name, ft in cfg.finetunes.items():
        assert ft.out == f"{cfg.runs[name].metrics}/finetune.json" and ft.task is None and ft.task_key == "task"
        assert ft.args == f"variant={ft.variant} pretrain_seed={ft.pretrain_seed}"


def test_experiment_tiny_shrinks_the_demo_suite_and_leaves_any_other_choice_alone():
    """experiment=tiny picks suite=demo_tiny (the demo's tasks at 200 examples); a suite named on the command line,
    or ~suite, wins over it and keeps nothing of the demo's tasks."""
    sizes = {k: (t.data.train_size, t.data.dev_size) for k, t in compose(["experiment=tiny"]).suite.tasks.items()}
    assert sizes == {"word_order": (200, 200), "bible_sections": (200, 200)}
    cfg = compose(["experiment=tiny", "~suite"])
    assert "suite" not in cfg and validate(cfg).suite is None and list(cfg.finetunes) == list(cfg.runs)
    assert list(compose(["experiment=tiny", "suite=table5_offline"]).suite.tasks) == ["mrpc", "sst2", "squad"]


def test_who_chooses_each_run_s_fine_tuning_settings_and_where_its_stage_reads_them():
    """The demo's baseline with mask_ratio_40 and nsp_off beside it: the baseline's first run chooses for itself,
    its other runs and mask_ratio_40 (the same network and objective); nsp_off (another objective) chooses its
    own. A run that takes another's choice depends on that run's finetune output; one that chooses names its own
    model (a dependency it has)."""
    cfg = compose(["grid.pretrain=[mask_ratio_40,nsp_off]"])
    assert {name: run.chooser for name, run in cfg.runs.items()} == {
        "baseline": "baseline", "baseline-s1": "baseline", "baseline-s2": "baseline", "mask_ratio_40": "baseline",
        "nsp_off": "nsp_off"}
    ft = cfg.finetunes
    assert ft["baseline-word_order"].choices == cfg.runs.baseline.pretrain
    assert ft["mask_ratio_40-word_order"].choices == f"{cfg.runs.baseline.metrics}/tasks/word_order"
    assert ft["baseline-s2-bible_sections"].choices == f"{cfg.runs.baseline.metrics}/tasks/bible_sections"
    assert ft["nsp_off-word_order"].choices == cfg.runs.nsp_off.pretrain
    every = compose(["grid=claims"])  # grid.finetune.choose=variant: each variant's first run chooses
    assert {n: r.chooser for n, r in every.runs.items() if r.variant == "mask_ratio_40"} == \
        {f"mask_ratio_40{s}": "mask_ratio_40" for s in ("", "-s1", "-s2", "-s3")}


@pytest.mark.parametrize("overrides, seeds", [
    ([], (0, 1, 2)),                                   # the demo: 2 fine-tuning seeds, 3 baseline runs
    (["experiment=tiny"], (0, 1)),                     # 1 seed, 2 baseline runs
    (["finetune.seeds=[0,1,2,3,4]"], (0, 1, 2, 3, 4)),  # 5 seeds already outnumber the 3 runs
    (["finetune.seeds=[3,7]", "grid.seeds.baseline=4"], (3, 7, 8, 9)),
])
def test_from_scratch_runs_a_seed_for_each_of_the_baseline_s_pretraining_runs(overrides, seeds):
    """From scratch has no pretraining run behind it: its fine-tuning runs are its units, as many as the pretrained
    arm's pretraining runs, so Welch's test between them has the same number a side. The stage that runs it has
    the baseline's runs among its DVC params (``finetunes.<key>``, beside the whole finetune group), so a change of
    either reruns it."""
    from pipeline.finetune.modes import scratch_seeds

    cfg = compose(overrides)
    lab = validate(cfg)
    assert scratch_seeds(lab.finetune.seeds, lab.grid.seeds.baseline) == seeds
    stages = {k: ft for k, ft in cfg.finetunes.items() if "scratch" in ft.modes}
    assert stages and all(ft.baseline_runs == lab.grid.seeds.baseline for ft in stages.values())
    assert all("baseline_runs" not in ft for k, ft in cfg.finetunes.items() if k not in stages)


def test_the_default_grid_is_the_baseline_alone_and_claims_adds_four_runs_a_pretraining_variant():
    """dvc repro pretrains the baseline three times and nothing else; grid=claims adds the two pretraining
    ablations it answers, four runs each, and reuses the baseline's runs (the same names, so the same stages)."""
    demo, claims = compose(), compose(["grid=claims"])
    assert list(demo.runs) == ["baseline", "baseline-s1", "baseline-s2"]
    assert list(claims.runs) == ["baseline", "baseline-s1", "baseline-s2", "mask_ratio_40", "mask_ratio_40-s1",
                                 "mask_ratio_40-s2", "mask_ratio_40-s3", "procedure_100_0_0", "procedure_100_0_0-s1",
                                 "procedure_100_0_0-s2", "procedure_100_0_0-s3"]
    for name in demo.runs:
        assert claims.runs[name] == demo.runs[name], name


def test_the_glue_folder_of_a_suite_is_one_setting():
    cfg = compose(["suite=table5", "suite.glue_dir=/data/glue"])
    assert {t: cfg.suite.tasks[t].data.data_dir for t in ("mnli_m", "qnli", "mrpc", "sst2")} == \
        dict.fromkeys(("mnli_m", "qnli", "mrpc", "sst2"), "/data/glue")
    assert cfg.suite.tasks.squad.data.name == "SQuAD-v1.1"  # the task file's relative ${..name}, inside a suite


@pytest.mark.parametrize("overrides, stage, fragment", [
    (["~suite", "suite_task=mrpc"], "finetune", "suite_task=mrpc: no suite is chosen: expected suite=<name> too"),
    (["suite=table6", "suite_task=squad"], "finetune",
     "suite_task='squad' is not a task of suite table6: expected one of mnli_m, mrpc, sst2"),
    (["suite=table6", "suite_task=mrpc"], "pretrain", "only the finetune stage runs a suite's tasks"),
])
def test_bad_suite_task_is_a_clear_error(overrides, stage, fragment):
    with pytest.raises(ConfigError) as e:
        apply_variant(compose(overrides), stage)
    assert fragment in str(e.value)


@pytest.mark.parametrize("override, fragment", [
    ("suite.columns.0.task=qqp", "suite.columns[0].task='qqp' is not allowed: expected one of the suite's tasks"),
    ("+suite.columns.1.mode=frozen_everything", "suite.columns[1].mode='frozen_everything' is not allowed"),
    ("+suite.modes.mrpc=[]", "suite.modes.mrpc=[] is not allowed: expected a non-empty list of"),
    ("suite.tasks.sst2.max_seq_length=4096", "suite.tasks.sst2.max_seq_length=4096 is not allowed"),
])
def test_bad_suite_settings_are_clear_errors(override, fragment):
    with pytest.raises(ConfigError) as e:
        validate(compose(["suite=table6", override]))
    assert fragment in str(e.value)


def test_a_suite_column_asking_for_a_metric_its_task_does_not_report_stops_the_check_conf_stage(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(OmegaConf.to_container(compose(["suite=table6", "+suite.columns.2.metric=f1"]))))
    with pytest.raises(ConfigError, match=r"suite.columns\[2\].metric='f1' is not allowed: expected one of the "
                                          r"metrics task sst2 reports \(accuracy\)"):
        check_params(params)


@pytest.mark.parametrize("table", ["paper_table5", "paper_table6", "paper_table8"])
def test_a_paper_table_names_its_grid_and_suite_with_the_paper_numbers_for_every_column(table):
    """experiment=paper_table<N>: the table's variants and its suite; each column has the paper's numbers in a
    family of the grid, so the report sets ours beside them."""
    cfg = compose([f"experiment={table}"])
    validate(cfg)
    assert cfg.suite.name == table.removeprefix("paper_")
    paper_columns = {c for f in load_families(list(cfg.grid.families)).values() for b in f.get("paper") or []
                     for c in b["columns"]}
    assert {c.paper for c in cfg.suite.columns} <= paper_columns
    assert len(cfg.finetunes) == len(cfg.runs) * len(cfg.suite.tasks)


GRID_SHAPES = {
    "default": [],
    "one pretraining run": ["grid=baseline", "grid.seeds.baseline=1"],
    "no variants": ["grid=baseline"],
    "a suite without the demo task": ["suite=table5_offline"],
    "one run on a suite": ["grid=baseline", "grid.seeds.baseline=1", "suite=table6"],
    "the tests' grid": ["experiment=tiny"],
}


@pytest.mark.parametrize("shape", GRID_SHAPES)
def test_every_grid_shape_is_a_dvc_graph_whose_every_dependency_is_written_or_a_source(tmp_path, shape):
    """dvc.yaml with params.yaml composed for the shape: every stage's dependency is a file of the repository or
    overlaps another stage's output, so `dvc exp run` reaches the report (a dependency no stage writes stops the
    pipeline after all its compute: the probe on models/variants with one pretraining run)."""
    import subprocess

    from dvc.repo import Repo

    cfg = compose(GRID_SHAPES[shape])
    validate(cfg)
    Repo.init(str(tmp_path), no_scm=True).close()
    (tmp_path / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(OmegaConf.to_container(cfg)))
    with Repo(str(tmp_path)) as repo:
        repo.index.graph  # DVC's own checks: no overlapping outputs, no cycle
        stages = {s.addressing.split(":")[-1]: ([d.def_path for d in s.deps], [o.def_path for o in s.outs])
                  for s in repo.index.stages}
    assert {"check_conf", f"pretrain@{BASELINE}", "probe", "report"} <= set(stages)
    assert len([s for s in stages if s.startswith("pretrain@")]) == len(cfg.runs)
    sources = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.splitlines()
    for name, (deps, _) in stages.items():
        for dep in deps:
            written = [other for other, (_, outs) in stages.items() if other != name and any(
                out == dep or out.startswith(f"{dep}/") or dep.startswith(f"{out}/") for out in outs)]
            source = any(f == dep or f.startswith(f"{dep}/") for f in sources)
            assert written or source, f"{shape}: {name} depends on {dep}, which no stage writes"


def test_a_grid_whose_variant_cannot_fit_in_memory_is_refused_at_start_up_naming_it(tmp_path, monkeypatch):
    """A grid listing a depth the machine cannot pretrain (24 layers at BERT-Large's width on 2 GiB) stops at the
    check_conf stage with one line naming the variant, before any stage spends compute; the demo's grid=depth
    fits."""
    import pipeline.check_conf as check_conf

    monkeypatch.setattr(check_conf, "device_memory", lambda lab: (2 * check_conf.GIB, "RAM", 1))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(OmegaConf.to_container(compose(["grid=depth"]))))
    check_params(params)
    wide = ["grid=depth", "family.depth.layers_24=['model.num_hidden_layers=24','model.hidden_size=1024',"
                          "'model.num_attention_heads=16','model.intermediate_size=4096']"]
    params.write_text(yaml.safe_dump(OmegaConf.to_container(compose(wide))))
    with pytest.raises(ConfigError) as e:
        check_params(params)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("variant layers_24 cannot be pretrained here: model demo (312M parameters) needs about")
    assert "more than the 2 GiB of RAM" in message and "grid.pretrain" in message


def test_every_claim_of_the_ledger_names_rows_its_families_have_and_what_runs_it():
    """claims.yaml: each measure names a family of pipeline/report/families and a row of it (or BLiMP, or the
    probe), the paper's direction as better or worse, and every claim the grid or experiment that runs it."""
    from pipeline.report.ledger import load_claims

    families = load_families(TABLES)
    claims = load_claims()
    assert len({c["id"] for c in claims}) == len(claims) == 11
    for claim in claims:
        assert claim["run_by"] and claim["paper"] and claim["claim"], claim["id"]
        for m in claim["measure"]:
            assert m["expect"] in ("better", "worse"), claim["id"]
            if "family" in m:
                rows = {r.get("id") or r.get("variant") or r.get("mode") for r in families[m["family"]]["rows"]}
                assert m.get("closest") or set(m.get("best_trained") or [m["row"]]) <= rows, (claim["id"], m)
            else:
                assert m.get("grammar") or m.get("probe"), (claim["id"], m)
    runs = {c["id"]: c["run_by"] for c in claims}
    for claim_id, grid in (("depth", "depth"), ("contextual_vs_static", "lineage")):
        assert runs[claim_id] == f"grid={grid}" and grid in GRIDS
    # the preset that decides it within 2 hours, and the grid it runs, both exist
    assert runs["depth_12_24"].startswith("experiment=depth_12_24 ") and "depth_12_24" in GRIDS
    assert compose(["experiment=depth_12_24"]).grid.name == "depth_12_24"
    claims_grid = compose(["grid=claims"]).grid.pretrain  # the pretraining ablations the default run leaves out
    for claim_id, variant in (("mask_ratio", "mask_ratio_40"), ("masking_procedure", "procedure_100_0_0")):
        assert runs[claim_id].startswith("grid=claims ") and variant in claims_grid, claim_id


def test_a_swept_grid_has_one_pilot_per_row_and_rate_under_keys_dvc_reads_whole():
    """grid=depth's pilots: every (row, rate) once, each key free of the dots DVC reads as nesting in
    ``pilots.<key>``; each swept run depends on its row's pilots, an unswept grid has none."""
    cfg = compose(["grid=depth"])
    sweep = cfg.grid.sweep
    assert len(cfg.pilots) == len(sweep.rows) * len(sweep.lrs) and not any("." in k for k in cfg.pilots)
    assert cfg.pilots["prenorm_12-lr3e-4"] == {"variant": "prenorm_12", "lr": 3e-4, "pairs": cfg.paths.pairs,
                                               "set": find_variant(cfg, "prenorm_12"),
                                               "out": "metrics/sweeps/prenorm_12/lr-3e-4"}
    assert {r.rate_from for r in cfg.runs.values() if r.variant == "layers_24"} == {"metrics/sweeps/layers_24"}
    pilot = apply_variant(OmegaConf.merge(cfg, {"variant": "prenorm_12", "pilot_lr": 3e-4}), "pretrain")
    assert (pilot.optim.lr, pilot.trainer.max_steps, pilot.model.layer_norm) == \
        (3e-4, round(sweep.fraction * cfg.trainer.max_steps), "pre")
    assert pilot.paths.metrics == pilot.paths.plots == "metrics/sweeps/prenorm_12/lr-3e-4"
    with pytest.raises(ConfigError, match="pilot_lr=0.0003: only the pilot stage"):
        apply_variant(OmegaConf.merge(cfg, {"variant": "prenorm_12", "pilot_lr": 3e-4}), "finetune")
    with pytest.raises(ConfigError, match="pilot_lr is null: expected the pilot's peak learning rate"):
        apply_variant(OmegaConf.merge(cfg, {"variant": "prenorm_12"}), "pilot")
    demo = compose([])
    assert not demo.pilots and all(r.rate_from == r.pairs for r in demo.runs.values())
    with pytest.raises(ConfigError, match="grid.sweep.rows: 'layers_99' is not a row of this grid"):
        validate(compose(["grid=depth", "grid.sweep.rows=[baseline,layers_99]"]))


@pytest.mark.parametrize("overrides", [[], ["~suite"], ["experiment=depth_word_order"], ["suite=table6"]])
def test_every_param_a_stage_lists_is_composed_and_the_report_follows_the_suite_columns(overrides):
    """DVC refuses a stage whose params name a key params.yaml lacks, so every key dvc.yaml lists (a foreach
    stage's for each of its items) is composed with or without a suite; and the report's own (``suite_shown``)
    carries the suite's name and columns, so an edit to a column's metric or paper figure reruns the report."""
    cfg = compose(overrides)
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        items = OmegaConf.to_container(OmegaConf.select(cfg, stage["foreach"][2:-1])) if "foreach" in stage else {"": {}}
        for key, item in items.items():
            for param in stage.get("do", stage).get("params", []):
                param = param.replace("${key}", key)
                param = re.sub(r"\$\{item\.(\w+)\}", lambda m: str(item[m[1]]), param)
                assert OmegaConf.select(cfg, param, default=KeyError) is not KeyError, f"{name}@{key}: {param}"
    assert "suite_shown" in stages["report"]["params"]
    suite = cfg.get("suite")
    assert cfg.suite_shown == {"name": suite.name if suite else None, "columns": suite.columns if suite else None}
