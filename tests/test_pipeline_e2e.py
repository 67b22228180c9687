"""The whole DVC pipeline on a copy of the project, at the tiny size.

Checks the reproducibility contract: a second ``dvc repro`` reruns nothing, and
changing one masking setting reruns exactly pretrain, finetune, the probe and the report.

The checks share their pipeline runs: the tiny grid runs once in full (``experiment=tiny``, into the project's
local MLflow store), and its baseline's two runs once more with a masking setting changed, recorded on a team's
MLflow server (the server's checks read that run); every later check builds on the project those runs leave.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, chromedriver, shared_data

pytestmark = pytest.mark.slow  # minutes: run with `python -m pytest -m slow`

VARIANTS = ["nsp_off_full_sentences", "ltr", "cbow", "elmo"]  # grid=ci, which experiment=tiny selects
RUNS = ["baseline", "baseline-s1", *VARIANTS]  # two pretraining runs of the baseline, one of each variant
TASKS = ["word_order", "bible_sections"]  # the default suite's: a finetune stage per (run, task)
RUN_STAGES = [f"pretrain@{r}" for r in RUNS] + [f"finetune@{r}-{t}" for r in RUNS for t in TASKS]  # zero_shot@:
                                                                                     # none until BLiMP is set
BASELINE_RUNS = ["baseline", "baseline-s1"]  # the rerun with a masking setting changed: grid=baseline, 2 runs
STAGES = ["check_conf", "plots_page", "prepare_corpus", "train_wordpiece", "make_pairs@baseline",
          "make_pairs@nsp_off_full_sentences", "eval_set", *RUN_STAGES, "zero_shot_floor", "probe", "report"]

SHARED: dict[str, str] = {}  # what one check leaves for a later one (the team server the grid's rerun went to)


def _env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(tmp / "home")  # no user-level git/dvc config leaks in
    return env


def _run(cmd: list[str], cwd: Path, env: dict) -> str:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout + r.stderr


def _ran(output: str) -> list[str]:
    return re.findall(r"Running stage '([a-z_0-9@-]+)'", output)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, dict]:
    """A fresh copy of the project's tracked and untracked-but-not-ignored files, as a git repo."""
    tmp = tmp_path_factory.mktemp("e2e")
    dst = tmp / "project"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dst / f)
    env = _env(tmp)
    (tmp / "home").mkdir()
    for cmd in (["git", "init", "-q"], ["git", "config", "user.name", "e2e"],
                ["git", "config", "user.email", "e2e@localhost"], ["git", "add", "-A"],
                ["git", "commit", "-qm", "copy"]):
        _run(cmd, dst, env)
    return dst, env


def _serve(args: list[str]):
    """An MLflow command serving on a free port of 127.0.0.1: (process, its URL), once it answers."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", *args, "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(f"{uri}/health", timeout=2).read()
            return proc, uri
        except OSError:
            assert proc.poll() is None and time.time() < deadline, f"mlflow {args[0]} did not start"
            time.sleep(0.5)


def _stop(proc) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """`mlflow server` on 127.0.0.1 with a SQL backend and an artifact store, as a team would run it."""
    tmp = tmp_path_factory.mktemp("server")
    proc, uri = _serve(["server", "--backend-store-uri", f"sqlite:///{tmp / 'server.db'}",
                        "--artifacts-destination", str(tmp / "artifacts")])
    yield uri, tmp / "artifacts"
    _stop(proc)


def test_dvc_pipeline_end_to_end(project, mlflow_server):
    dst, env = project
    out = _run([sys.executable, "-m", "dvc", "exp", "run", "-S", "experiment=tiny"], dst, env)
    ran = _ran(out)
    assert sorted(ran) == sorted(STAGES), out[-2000:]
    for before, after in (("make_pairs@baseline", "pretrain@baseline"), ("make_pairs@nsp_off_full_sentences",
                                                                         "pretrain@nsp_off_full_sentences"),
                          ("pretrain@ltr", "finetune@ltr-word_order"),
                          ("finetune@baseline-word_order", "finetune@baseline-s1-word_order"),  # it takes the
                          ("finetune@ltr-bible_sections", "report")):                            # baseline's choices
        assert ran.index(before) < ran.index(after)

    # params.yaml is conf/ composed with the override
    params = yaml.safe_load((dst / "params.yaml").read_text())
    assert params["model"]["name"] == "micro" and params["trainer"]["max_steps"] == 30

    for name in ("corpus", "tokenizer", "pairs", "pretrain", *(f"tasks/{t}/finetune" for t in TASKS)):
        json.loads((dst / "metrics" / f"{name}.json").read_text())
    chosen = json.loads((dst / "metrics" / "tasks" / "word_order" / "finetune.json").read_text())
    assert chosen["scored_on"] == "test" and chosen["dev_examples"] and chosen["test_examples"]
    assert {m["selection"]["by"] for m in chosen["modes"].values()} == {"baseline"}
    assert set(chosen["control"]["modes"]) == {"tfidf", "pretrained"}  # the word-order control (tiny's modes)
    taken = json.loads((dst / "metrics" / "variants" / "baseline-s1" / "tasks" / "word_order" / "finetune.json"
                        ).read_text())
    assert {m: r["selection"]["chosen"] for m, r in taken["modes"].items()} == \
        {m: chosen["modes"][m]["selection"]["chosen"] for m in taken["modes"]} and "control" not in taken
    report = (dst / "reports" / "report.md").read_text()
    assert "pretrained" in report and "scratch" in report and "figures/pretrain_curves.png" in report
    html = (dst / "reports" / "index.html").read_text()
    figures = list((dst / "reports" / "figures").iterdir())
    assert html.count("data:image/png;base64,") == len(figures) >= 6
    ablations = json.loads((dst / "reports" / "ablations.json").read_text())
    assert [f["name"] for f in ablations["families"]] == ["pretraining", "features", "nsp", "objective", "lineage"]
    assert set(ablations["runs"]) == set(RUNS)
    assert ablations["method"]["pretraining_runs"] == {"baseline": 2, **dict.fromkeys(VARIANTS, 1)}
    hf = dst / "models" / "pretrain" / "hf"
    assert {"config.json", "model.safetensors", "vocab.txt", "tokenizer.json"} <= {p.name for p in hf.iterdir()}

    metrics = subprocess.run([sys.executable, "-m", "dvc", "metrics", "show", "--json"], cwd=dst, env=env,
                             capture_output=True, text=True, check=True).stdout
    shown = json.loads(metrics)[""]["data"]
    assert list(shown) == ["reports/summary.json"], list(shown)  # the headline numbers only: `dvc exp show` fits
    summary = shown["reports/summary.json"]["data"]
    assert set(summary) == {"floors", "baseline", "ledger", "control", *VARIANTS} and "val_mlm_acc" in summary["baseline"]
    # the claims ledger: every claim of claims.yaml, those this grid runs with a verdict from its own tests, the
    # downstream ones read on both tasks
    verdicts = {name: claim["verdict"] for name, claim in summary["ledger"].items()}
    assert set(verdicts.values()) <= {"shown", "opposite", "inconclusive", "mixed", "not run"}
    assert verdicts["depth"] == "not run" and verdicts["pretraining_pays"] != "not run", verdicts
    assert set(summary["ledger"]["pretraining_pays"]["tasks"]) == set(TASKS)
    assert summary["control"]["word_order/needs_word_order"] in (True, False)
    assert "Fine-tuning: every arm at its best" in report and "The word-order control" in report
    # every run on the fixed evaluation set, beside the count-based floors
    assert {"fixed_acc"} <= set(summary["baseline"]) and {"fixed_acc"} <= set(summary["elmo"])
    assert {"majority", "left", "left_right"} <= set(summary["floors"])
    assert (dst / "plots" / "pretrain_fixed.csv").read_text().startswith("step,acc_masked")
    assert "Has the baseline learned language?" in report and "figures/baseline_fixed_curves.png" in report
    # every run on the layout probe at the end, the baseline along pretraining too
    assert (dst / "plots" / "pretrain_layout.csv").read_text().startswith("step,tokens,rows,single16_early")
    assert "Does it read ordinary text? The layout probe" in report and "figures/layout_probe.png" in report
    assert {"layout", "layout_min"} <= set(summary["baseline"]) and "layout_min" in summary["elmo"]
    assert set(summary["floors"]["layout"]["left"]) == {f"single{n}_{w}" for n in (16, 32) for w in
                                                        ("early", "middle", "late")} | {"pair_A", "pair_B"}
    assert "pretrained_accuracy" in summary["baseline"] and "val_bilm_acc" in summary["elmo"]
    plots = _run([sys.executable, "-m", "dvc", "plots", "show", "-o", str(dst / "dvc_plots")], dst, env)
    assert "cdn." not in (dst / "dvc_plots" / "index.html").read_text(), plots  # the plots_page stage's template

    # Nothing changed: nothing reruns.
    again = _run([sys.executable, "-m", "dvc", "repro"], dst, env)
    assert _ran(again) == [], again

    # conf/ edited without recomposing params.yaml: `dvc repro` stops with one line saying what to run.
    preset = dst / "conf" / "trainer" / "demo.yaml"
    original = preset.read_text()
    preset.write_text(original.replace("log_every_n_steps: 10", "log_every_n_steps: 20"))
    stale = subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=dst, env=env, capture_output=True,
                           text=True, timeout=900)
    said = stale.stdout + stale.stderr
    assert stale.returncode != 0, said[-2000:]
    assert "params.yaml was composed from an older conf/" in said and "dvc exp run" in said, said[-2000:]
    assert _ran(said) == ["check_conf"], said[-2000:]
    preset.write_text(original)

    # Every run is in MLflow with its params, git commit and data hashes.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{dst / 'mlflow.db'}")
    exp = client.get_experiment_by_name("bert-lab")
    runs = client.search_runs([exp.experiment_id])
    pre = [r for r in runs if r.data.tags.get("stage") == "pretrain"]
    fine = [r for r in runs if r.data.tags.get("stage") == "finetune"]
    first_runs = [(v, "0", "0.15") for v in ("baseline", *VARIANTS)]  # and the baseline's second
    assert sorted((r.data.tags["variant"], r.data.tags["pretrain_seed"], r.data.params["masking.mlm_probability"])
                  for r in pre) == sorted([("baseline", "1", "0.15"), *first_runs])
    assert {r.data.params["objective.lm"] for r in pre if r.data.tags["variant"] == "ltr"} == {"left_to_right"}
    summary = [r for r in fine if r.data.tags.get("kind") == "summary"]  # one per finetune stage run
    fine = [r for r in fine if r.data.tags.get("kind") != "summary"]
    assert len(summary) == len(RUNS) * len(TASKS)
    # nested: each candidate and (mode, seed) run under its stage's run, that under the pretrain run it started from
    assert {r.data.tags["mlflow.parentRunId"] for r in fine} <= {r.info.run_id for r in summary}
    assert {r.data.tags["mlflow.parentRunId"] for r in summary} <= {p.info.run_id for p in pre}
    assert all("pretrained/accuracy_mean" in r.data.metrics for r in summary)
    for task in TASKS:
        assert sum(f"downstream/{task}/pretrained/accuracy_mean" in p.data.metrics for p in pre) == len(RUNS)
    # The baseline and each variant (another network or objective: all of grid ci's) choose on their first run, one
    # MLflow run per candidate with its dev score; the baseline's second run takes the choice: one run per mode and
    # seed, with test scores.
    first = [r for r in fine if r.data.tags["pretrain_seed"] == "0" and r.data.tags["seed"] == "0"
             and "control" not in r.data.tags]
    second = [r for r in fine if r.data.tags["pretrain_seed"] == "1"]
    assert all("candidate" in r.data.tags and "val/accuracy" in r.data.metrics for r in first)
    assert all("candidate" not in r.data.tags and "test/accuracy" in r.data.metrics for r in second)
    assert len(second) == len(TASKS) * 2  # baseline-s1: 2 modes, 1 seed
    # from scratch, whose runs are its only units, runs a seed for each of the baseline's two pretraining runs
    assert sorted(r.data.tags["seed"] for r in fine if r.data.tags["mode"] == "scratch"
                  and "candidate" not in r.data.tags and "control" not in r.data.tags) == ["1"] * len(TASKS)
    assert {r.data.tags["mode"] for r in first if r.data.tags["variant"] == "baseline"} == \
        {"pretrained", "scratch", "tfidf", "frozen_weighted"}
    assert all(r.data.tags["pretrain_run_id"] in {p.info.run_id for p in pre} for r in fine)
    assert all(len(r.data.tags["git_commit"]) >= 40 and "data.pairs.sha256" in r.data.tags for r in pre)
    _check_grid_run(client, pre)

    # One masking setting changed: exactly the stages downstream of it rerun -- on the baseline's two runs alone
    # (grid=baseline: every variant inherits the baseline's masking and would rerun the same way, 24 stages more),
    # and neither its examples nor the fixed set. This run goes to the team's tracking server
    # (test_a_team_mlflow_server_records_the_pipeline reads what it recorded there).
    uri, _ = mlflow_server
    changed = _run([sys.executable, "-m", "dvc", "exp", "run", "-S", "experiment=tiny", "-S", "grid=baseline",
                    "-S", "grid.seeds.baseline=2", "-S", "masking.mlm_probability=0.2"], dst,
                   {**env, "MLFLOW_TRACKING_URI": uri})
    rerun = [f"pretrain@{r}" for r in BASELINE_RUNS] + [f"finetune@{r}-{t}" for r in BASELINE_RUNS for t in TASKS]
    assert sorted(_ran(changed)) == sorted(["check_conf", *rerun, "probe", "report"]), changed[-2000:]
    SHARED["server_run"] = uri


def _check_grid_run(client, pre: list, name: str = "ci") -> None:
    """The grid's run (the report's; grid ``name``) parents the pretrain runs ``pre`` behind its report, with the
    report's numbers."""
    runs = client.search_runs([client.get_experiment_by_name("bert-lab").experiment_id])
    grids = {r.info.run_id: r for r in runs if r.data.tags.get("kind") == "grid"}
    parents = {r.data.tags.get("mlflow.parentRunId") for r in pre}
    assert len(parents) == 1 and parents <= set(grids), parents
    grid = grids[parents.pop()]
    assert grid.data.tags["grid"] == name and "baseline/val_mlm_acc" in grid.data.metrics
    assert "report/index.html" in [f.path for f in client.list_artifacts(grid.info.run_id, "report")]
    assert "config.yaml" in [f.path for f in client.list_artifacts(pre[0].info.run_id)]


def test_mlflow_ui_lists_the_grid_with_its_downstream_scores(project, tmp_path):
    """`mlflow ui` as the README opens it, in headless Chromium: the runs table of the pretraining runs, sorted by
    their fine-tuned score from the sort menu, lists every variant of the grid with that score."""
    dst, env = project
    if not (dst / "mlflow.db").exists():
        pytest.skip("needs the pipeline run above")
    driver_path = chromedriver()
    from mlflow.tracking import MlflowClient
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    client = MlflowClient(f"sqlite:///{dst / 'mlflow.db'}")
    exp = client.get_experiment_by_name("bert-lab").experiment_id
    pre = client.search_runs([exp], "tags.stage = 'pretrain'", max_results=1000)
    metric = "downstream/word_order/pretrained/accuracy_mean"
    proc, uri = _serve(["ui", "--backend-store-uri", f"sqlite:///{dst / 'mlflow.db'}"])
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=2400,1400"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    try:
        driver.get(f"{uri}/#/experiments/{exp}?workflowType=machine_learning")  # the README's link
        deadline = time.time() + 120
        while not [b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.startswith("Sort")]:
            assert time.time() < deadline, driver.execute_script("return document.body.innerText")[:2000]
            time.sleep(1)
        assert "/runs" in driver.current_url  # the training-runs view, not the GenAI overview
        driver.get(f"{uri}/#/experiments/{exp}/runs?workflowType=machine_learning&orderByAsc=false"
                   "&searchFilter=tags.stage%20%3D%20%27pretrain%27")
        driver.refresh()  # a change of the URL's fragment alone keeps the page's state: load it afresh
        deadline = time.time() + 120
        while "tags.stage = 'pretrain'" not in driver.execute_script(
                "return Array.from(document.querySelectorAll('input')).map(i => i.value).join(' ')"):
            assert time.time() < deadline, driver.execute_script("return document.body.innerText")[:2000]
            time.sleep(1)
        deadline = time.time() + 120
        while True:  # the Sort menu lists the metrics of the runs loaded when it opened: reopen it until it has ours
            next(b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.startswith("Sort")).click()
            time.sleep(2)
            items = driver.find_elements(By.CSS_SELECTOR, f"[data-testid='sort-select-{metric}']")
            if items:
                items[0].click()
                break
            assert time.time() < deadline, driver.execute_script("return document.body.innerText")[-2000:]
            driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
            time.sleep(3)
        time.sleep(5)
        text = driver.execute_script("return document.body.innerText")
        driver.save_screenshot(str(tmp_path / "mlflow-runs.png"))
    finally:
        driver.quit()
        _stop(proc)
    assert f"{len(pre)} matching runs" in text, text[-2000:]
    assert metric in text and all(r.info.run_name in text for r in pre), text[-3000:]
    assert all(str(r.data.metrics[metric]) in text for r in pre), text[-3000:]  # each run's score, as MLflow shows it


def test_a_team_mlflow_server_records_the_pipeline(project, mlflow_server):
    """The pipeline against a tracking server (the baseline's rerun above, ``MLFLOW_TRACKING_URI`` set): every run
    there with the changed setting, nested as in the local store, the model export in its artifact store."""
    dst, env = project
    uri, artifacts = mlflow_server
    if SHARED.get("server_run") != uri:
        pytest.skip("needs the pipeline run above")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("bert-lab").experiment_id])
    stages = [r.data.tags.get("stage") for r in runs]
    assert stages.count("pretrain") == len(BASELINE_RUNS) and stages.count("finetune") >= 8 * len(TASKS)
    pre = [r for r in runs if r.data.tags.get("stage") == "pretrain"]
    assert {r.data.params["masking.mlm_probability"] for r in pre} == {"0.2"}
    assert sorted((r.data.tags["variant"], r.data.tags["pretrain_seed"]) for r in pre) == [("baseline", "0"),
                                                                                           ("baseline", "1")]
    _check_grid_run(client, pre, "baseline")
    summaries = [r for r in runs if r.data.tags.get("kind") == "summary"]
    assert {r.data.tags["mlflow.parentRunId"] for r in summaries} <= {p.info.run_id for p in pre}
    assert list(artifacts.rglob("model.safetensors"))  # the export went to the server's artifact store
    report = (dst / "reports" / "ablations.json").read_text()
    baseline = next(r for r in pre if r.data.tags["variant"] == "baseline" and r.data.tags["pretrain_seed"] == "0")
    assert baseline.info.run_id in report


def test_a_fresh_clone_pulls_every_output_from_a_dvc_remote_without_recomputing(project, tmp_path):
    dst, env = project
    if not (dst / "reports" / "summary.json").exists():  # what the pipeline run builds (dvc.lock is committed)
        pytest.skip("needs the pipeline run above")
    remote = tmp_path / "remote"
    _run([sys.executable, "-m", "dvc", "remote", "add", "-d", "local", str(remote)], dst, env)
    _run([sys.executable, "-m", "dvc", "push"], dst, env)
    _run(["git", "add", "-A"], dst, env)
    _run(["git", "commit", "-qm", "pipeline results"], dst, env)
    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", str(dst), str(clone)], tmp_path, env)
    _run([sys.executable, "-m", "dvc", "pull"], clone, env)
    status = _run([sys.executable, "-m", "dvc", "status"], clone, env)
    assert "up to date" in status, status
    assert _ran(_run([sys.executable, "-m", "dvc", "repro"], clone, env)) == []
    show = [json.loads(_run([sys.executable, "-m", "dvc", "metrics", "show", "--json"], d, env)) for d in (dst, clone)]
    assert show[0][""]["data"] == show[1][""]["data"]  # the same metrics, read from the pulled files
    for f in ("models/pretrain/hf/model.safetensors", "data/pairs/train/meta.json", "reports/index.html"):
        assert (clone / f).read_bytes() == (dst / f).read_bytes(), f
    # The report reads only DVC-tracked files: redrawn in the clone, which has no MLflow store, it is the same.
    assert not (clone / "mlflow.db").exists()
    assert _ran(_run([sys.executable, "-m", "dvc", "repro", "-f", "-s", "report"], clone, env)) == ["report"]
    for f in ("reports/index.html", "reports/report.md", "reports/ablations.json"):
        assert (clone / f).read_bytes() == (dst / f).read_bytes(), f


def test_dvc_queue_runs_an_ad_hoc_sweep_point(project):
    """`dvc exp run --queue -S ...` then `dvc queue start`: the queued point runs as a DVC experiment. The point
    is one pretraining run (the baseline's), as a sweep point over a setting usually is; the grid's other rows
    would repeat the same mechanics."""
    dst, env = project
    if not (dst / "reports" / "summary.json").exists():  # what the pipeline run builds (dvc.lock is committed)
        pytest.skip("needs the pipeline run above")
    _run([sys.executable, "-m", "dvc", "exp", "run", "--queue", "-S", "experiment=tiny", "-S", "grid=baseline",
          "-S", "grid.seeds.baseline=1", "-S", "masking.mlm_probability=0.25",
          "-S", "masking.max_predictions_per_seq=null"], dst, env)
    _run([sys.executable, "-m", "dvc", "queue", "start"], dst, env)
    deadline = time.time() + 900
    while True:
        status = _run([sys.executable, "-m", "dvc", "queue", "status"], dst, env)
        if "Success" in status or "Failed" in status or time.time() > deadline:
            break
        time.sleep(5)
    assert "Success" in status, status
    exps = json.loads(_run([sys.executable, "-m", "dvc", "exp", "show", "--json"], dst, env))
    probs = []
    for rev in exps:
        for exp in rev.get("experiments") or []:
            for run in exp["revs"]:
                params = run["data"]["params"]["params.yaml"]["data"]
                metrics = run["data"]["metrics"]
                probs.append(params["masking"]["mlm_probability"])
                if params["masking"]["mlm_probability"] == 0.25:
                    assert "pretrained_accuracy" in metrics["reports/summary.json"]["data"]["baseline"]
    assert 0.25 in probs, exps
    # Its MLflow runs are in the project's store, not in the temporary copy DVC ran it in (and deleted),
    # tagged with the DVC experiment's name and baseline revision.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{dst / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("bert-lab").experiment_id],
                              "params.`masking.mlm_probability` = '0.25'")
    assert {r.data.tags.get("stage") for r in runs} >= {"pretrain", "finetune"}
    assert all(r.data.tags.get("dvc.exp_name") and r.data.tags.get("dvc.baseline_rev") for r in runs)


def test_hydra_multirun_records_each_job(project):
    """A parallel sweep (joblib launcher): one MLflow run per job, outputs in each job's folder, DVC's untouched."""
    dst, env = project
    if not (dst / "data" / "pairs").exists():
        pytest.skip("needs the pipeline run above")
    before = (dst / "metrics" / "pretrain.json").read_bytes()
    _run([sys.executable, "-m", "stages.pretrain", "-m", "experiment=tiny", "trainer.max_steps=3",
          "runtime.progress=false", "runtime.num_threads=1", "optim.lr=0.001,0.002", "hydra/launcher=local",
          "hydra.sweep.dir=logs/multirun/test"], dst, env)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{dst / 'mlflow.db'}")
    exp = client.get_experiment_by_name("bert-lab")
    runs = client.search_runs([exp.experiment_id], "params.`trainer.max_steps` = '3'")
    assert sorted(r.data.params["optim.lr"] for r in runs) == ["0.001", "0.002"]
    for job in ("0", "1"):
        metrics = json.loads((dst / "logs" / "multirun" / "test" / job / "metrics" / "pretrain.json").read_text())
        assert metrics["steps"] == 3 and metrics["mlflow_run_id"] in {r.info.run_id for r in runs}
        assert (dst / "logs" / "multirun" / "test" / job / "pretrain" / "hf" / "model.safetensors").exists()
    assert (dst / "metrics" / "pretrain.json").read_bytes() == before
    assert not (dst / "outputs").exists() and not (dst / "multirun").exists()


def test_nsp_off_packing_with_static_masking_trains(project):
    """RoBERTa's FULL-SENTENCES packing, masked LM alone, one fixed mask per stored example."""
    dst, env = project
    if not (dst / "data" / "corpus").exists():
        pytest.skip("needs the pipeline run above")
    common = ["experiment=tiny", "objective=mlm", "pairs.format=full_sentences", "masking.static=true",
              "runtime.progress=false", "paths.pairs=data/pairs_packed", "paths.metrics=metrics_packed",
              "paths.pretrain=models/packed", "paths.plots=plots_packed"]
    _run([sys.executable, "-m", "stages.make_pairs", *common], dst, env)
    pairs = json.loads((dst / "metrics_packed" / "pairs.json").read_text())
    assert pairs["train"]["format"] == "full_sentences" and "fraction_random_next" not in pairs["train"]
    _run([sys.executable, "-m", "stages.pretrain", *common, "trainer.max_steps=6", "trainer.val_check_interval=3"],
         dst, env)
    metrics = json.loads((dst / "metrics_packed" / "pretrain.json").read_text())
    assert metrics["val/mlm_acc"] >= 0 and not any("nsp" in k for k in metrics), metrics


def test_a_task_suite_runs_one_stage_per_run_and_task_and_reruns_only_what_changed(project):
    """suite=table5_offline (MRPC, SST-2, SQuAD) on the baseline's two pretraining runs: a finetune stage per
    (run, task), a report with a tested column per task; changing one task's data reruns only that task's stages
    and the report. Last in this file: it leaves the suite's settings in the copy's params.yaml."""
    dst, env = project
    if not (dst / "reports" / "summary.json").exists():  # what the pipeline run builds (dvc.lock is committed)
        pytest.skip("needs the pipeline run above")
    glue, squad = shared_data("glue"), shared_data("squad", "v1.1", "dev-v1.1.json")
    sizes = [f"suite.tasks.{t}.data.{k}={n}" for t in ("mrpc", "sst2") for k, n in (("train_size", 96),
                                                                                  ("dev_size", 64))]
    common = ["experiment=tiny", "grid=baseline", "grid.seeds.baseline=2", "suite=table5_offline",
              f"suite.glue_dir={glue}", f"suite.tasks.squad.data.train={squad}", "suite.tasks.squad.data.train_size=60",
              "suite.tasks.squad.data.dev_size=30", *sizes]
    sets = [a for o in common for a in ("-S", o)]
    out = _run([sys.executable, "-m", "dvc", "exp", "run", *sets], dst, env)
    ran = _ran(out)
    finetunes = [f"finetune@baseline{s}-{t}" for s in ("", "-s1") for t in ("mrpc", "sst2", "squad")]
    assert sorted(s for s in ran if s.startswith("finetune@")) == sorted(finetunes), ran
    assert not [s for s in ran if s.startswith(("pretrain@", "make_pairs@"))], ran  # the models are reused
    for s in ("", "-s1"):
        folder = dst / "metrics" / ("variants/baseline-s1" if s else "") / "tasks"
        assert json.loads((folder / "squad" / "finetune.json").read_text())["task"] == "SQuAD-v1.1"
        assert (folder / "squad" / "predictions" / "pretrained-s0" / "predictions.json").exists()
    res = json.loads((dst / "reports" / "ablations.json").read_text())
    assert [c["label"] for c in res["suite"]["columns"]] == ["MRPC accuracy", "SST-2 accuracy", "SQuAD-v1.1 f1"]
    rows = {r["name"]: r for r in res["suite"]["families"][0]["rows"]}  # pretraining: pretrained vs scratch
    assert all(c["ran"] and c["n_finetune"] for c in rows["pretrained"]["cells"])
    assert all(c["vs"]["test"] for c in rows["scratch"]["cells"])  # each column tested on its own numbers
    summary = json.loads((dst / "reports" / "summary.json").read_text())
    assert {"mrpc/pretrained_accuracy", "sst2/pretrained_accuracy", "squad/pretrained_f1"} <= set(summary["baseline"])
    again = _ran(_run([sys.executable, "-m", "dvc", "exp", "run", *sets[:-2], "-S", "suite.tasks.sst2.data.dev_size=48"],
                      dst, env))
    assert sorted(s for s in again if s != "check_conf") == \
        sorted(["finetune@baseline-sst2", "finetune@baseline-s1-sst2", "report"]), again
