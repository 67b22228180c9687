"""What runs record: the resolved config without secrets, content hashes of inputs."""
from __future__ import annotations

from pipeline.config import compose
from pipeline.tracking import content_hash, flatten_config


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
