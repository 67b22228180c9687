"""What runs record: the resolved config without secrets, content hashes of inputs."""
from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.config import compose, resolved_config, validate
from pipeline.errors import ConfigError
from pipeline.tracking import PARENT, check_tracking, content_hash, flatten_config, git_commit, mlflow_logger, record_grid


def test_flattened_params_cover_the_config_but_not_the_tracking_uri():
    cfg = compose(["tracking.uri=https://user:token@mlflow.example"])
    params = flatten_config(validate(cfg).resolved)
    assert params["model.hidden_size"] == "128" and params["masking.mlm_probability"] == "0.15"
    assert "tracking.uri" not in params and not any("token@" in v for v in params.values())
    assert "uri" not in resolved_config(cfg)["tracking"] and resolved_config(cfg)["model"]["hidden_size"] == 128


def test_a_run_carries_its_resolved_config_and_its_artifacts_stay_in_the_project(tmp_path, monkeypatch):
    """config.yaml on the run; a new experiment of the local store keeps artifacts in the store's folder,
    whatever the working folder (a queued DVC experiment runs in a copy that DVC deletes)."""
    import yaml
    from mlflow.tracking import MlflowClient

    store = tmp_path / "project" / "mlflow.db"
    store.parent.mkdir()
    elsewhere = tmp_path / "copy"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = compose([f"tracking.uri=sqlite:///{store}"])
    logger = mlflow_logger(validate(cfg), run_name="r", tags={"stage": "test"})
    client = MlflowClient(f"sqlite:///{store}")
    saved = yaml.safe_load(open(client.download_artifacts(logger.run_id, "config.yaml", str(tmp_path))))
    assert saved["model"] == dict(cfg.model) and "uri" not in saved["tracking"]
    location = client.get_experiment(logger.experiment_id).artifact_location
    assert location.startswith((tmp_path / "project" / "mlruns").as_uri()), location
    assert not list(elsewhere.iterdir())


def test_the_grid_run_parents_exactly_the_runs_of_its_report(tmp_path):
    """Reused when the report is drawn again: new metrics, children = this report's runs, the report attached."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = compose([f"tracking.uri={uri}"])
    client = MlflowClient(uri)
    exp = client.create_experiment(cfg.tracking.experiment, artifact_location=(tmp_path / "mlruns").as_uri())
    a, b = (client.create_run(exp, run_name=n).info.run_id for n in ("pretrain-a", "pretrain-b"))
    report = tmp_path / "reports"
    report.mkdir()
    (report / "report.md").write_text("# report\n")
    first = record_grid(validate(cfg).tracking, "demo", {"baseline/pretrained_accuracy": 0.5}, [a, b, "f" * 32], report)
    assert {client.get_run(r).data.tags.get(PARENT) for r in (a, b)} == {first}
    again = record_grid(validate(cfg).tracking, "demo", {"baseline/pretrained_accuracy": 0.6}, [b], report)
    grid = client.get_run(again)
    assert again == first and grid.data.metrics["baseline/pretrained_accuracy"] == 0.6
    assert PARENT not in client.get_run(a).data.tags and client.get_run(b).data.tags[PARENT] == first
    assert grid.data.tags["kind"] == "grid" and grid.info.status == "FINISHED"
    assert [f.path for f in client.list_artifacts(again, "report")] == ["report/report.md"]
    assert record_grid(validate(cfg).tracking, "other", {}, [], report) != first  # another grid, another run


def test_content_hash_follows_bytes_and_names(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("one")
    h1 = content_hash(tmp_path / "a")
    assert content_hash(tmp_path / "a") == h1
    (tmp_path / "a" / "x.txt").write_text("two")
    assert content_hash(tmp_path / "a") != h1


def test_git_commit_is_dirty_for_code_changes_but_not_for_dvc_lock(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)
    git("init", "-q")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n")
    (tmp_path / "train.py").write_text("print(1)\n")
    git("add", ".")
    git("commit", "-qm", "first")
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")  # what DVC writes after each stage
    (tmp_path / "sub").mkdir()
    assert git_commit(tmp_path) == sha
    assert git_commit(tmp_path / "sub") == sha  # from a subfolder too
    (tmp_path / "train.py").write_text("print(2)\n")
    assert git_commit(tmp_path) == git_commit(tmp_path / "sub") == f"{sha}-dirty"


@pytest.mark.slow  # three interpreters at once, 9 s (CI runs the slow marker too)
def test_two_experiments_starting_together_share_a_new_local_store(tmp_path):
    """`dvc queue start -j 2` on a fresh clone: both stages create the store at once; neither fails."""
    store = tmp_path / "mlflow.db"
    code = ("import sys; from pipeline.config import compose, validate; from pipeline.tracking import check_tracking; "
            f"check_tracking(validate(compose(['tracking.uri=sqlite:///{store}'])).tracking)")
    procs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(3)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    from mlflow.tracking import MlflowClient

    names = [e.name for e in MlflowClient(f"sqlite:///{store}").search_experiments()]
    assert names.count("bert-lab") == 1


def test_a_local_store_that_cannot_be_created_is_one_line_before_any_compute(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ConfigError, match="cannot be written"):
        check_tracking(validate(compose([f"tracking.uri=sqlite:///{tmp_path / 'file' / 'mlflow.db'}"])).tracking)
