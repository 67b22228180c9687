"""What runs record: the resolved config without secrets, content hashes of inputs."""
from __future__ import annotations

import subprocess

from pipeline.config import compose
from pipeline.tracking import content_hash, flatten_config, git_commit


def test_flattened_params_cover_the_config_but_not_the_tracking_uri():
    cfg = compose(["tracking.uri=https://user:token@mlflow.example"])
    params = flatten_config(cfg)
    assert params["model.hidden_size"] == "128" and params["masking.mlm_probability"] == "0.15"
    assert "tracking.uri" not in params and not any("token@" in v for v in params.values())


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
