"""MLflow: where runs go, and what every run records.

Default store: an embedded SQLite database in the project folder
(``mlflow.db``), so no server is needed. ``tracking.uri`` or the
``MLFLOW_TRACKING_URI`` environment variable points runs at a team server.
Each run records the resolved config as params, the git commit and the hashes
of its input data as tags.

A server that does not answer is an error before any compute is spent (no
silent fallback: runs would end up in two places); ``tracking.uri=null`` with
``MLFLOW_TRACKING_URI`` unset uses the local store.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Mapping

import yaml
from pipeline.errors import ConfigError
from pipeline.settings import Lab, TrackingSettings

log = logging.getLogger(__name__)

LOCAL_STORE = "sqlite:///mlflow.db"  # in the project's folder (project_root): see local_store()
EXPERIMENT_COPY = (".dvc", "tmp", "exps")  # where `dvc exp run --queue` runs an experiment, in a temporary copy
EXPERIMENT_KIND = "mlflow.experimentKind"  # MLflow 3's UI: training runs (not GenAI traces) as the landing page
PARENT = "mlflow.parentRunId"  # MLflow's nesting: the runs table folds a run's children under it


def project_root(start: str | Path | None = None) -> Path:
    """The project's folder, also from inside the temporary copy a queued DVC experiment runs in (which DVC
    deletes afterwards: a store there would lose its runs)."""
    path = Path(start or os.environ.get("DVC_ROOT") or Path.cwd()).resolve()
    parts = path.parts
    for i in range(len(parts) - len(EXPERIMENT_COPY) + 1):
        if parts[i:i + len(EXPERIMENT_COPY)] == EXPERIMENT_COPY:
            return Path(*parts[:i])
    return path


def local_store(start: str | Path | None = None) -> str:
    return f"sqlite:///{project_root(start) / 'mlflow.db'}"


def tracking_uri(tracking: TrackingSettings) -> str:
    return tracking.uri or os.environ.get("MLFLOW_TRACKING_URI") or local_store()


def artifact_location(tracking: TrackingSettings) -> str | None:
    """Where a new experiment of the local store keeps its artifacts: ``mlruns/`` in the project's folder (MLflow's
    default is relative to the working folder: for an experiment first created by a queued run, the temporary
    copy DVC deletes). A server decides for itself (None)."""
    uri = tracking_uri(tracking)
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri[len("sqlite:///"):]).resolve().parent / "mlruns").as_uri()


def redact(uri: str) -> str:
    """``uri`` without the credentials it may carry (``https://user:token@host`` -> ``https://***@host``)."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1***@", uri)


def check_tracking(tracking: TrackingSettings, timeout: float = 10.0) -> None:
    """A tracking server that does not answer its health check is a ``ConfigError`` naming it; a local store is
    made ready (``prepare_local_store``)."""
    uri = tracking_uri(tracking)
    if uri.startswith("sqlite:///"):
        prepare_local_store(tracking, uri)
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout) as r:
            r.read()
    except (urllib.error.URLError, OSError) as e:
        source = "tracking.uri" if tracking.uri else "MLFLOW_TRACKING_URI"
        reason = getattr(e, "reason", e)
        raise ConfigError(f"{source}={redact(uri)}: the MLflow server does not answer ({reason}); nothing was "
                          "computed. Start the server, or unset it to record runs in the local store "
                          f"({local_store()})") from None


def prepare_local_store(tracking: TrackingSettings, uri: str) -> None:
    """Create (or upgrade) the SQLite store and the experiment one process at a time.

    ``dvc queue start -j 2`` starts two experiments at once; on a new store both
    would create its tables and the experiment together, and one fails
    (``table _alembic_tmp_metrics already exists``). A file lock beside the
    store makes the first do it and the second find it done.
    """
    from filelock import FileLock
    from mlflow.tracking import MlflowClient

    db = Path(uri[len("sqlite:///"):]).resolve()
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(db) + ".lock", timeout=300):
            client = MlflowClient(uri)  # creates or migrates the tables
            if client.get_experiment_by_name(tracking.experiment) is None:
                client.create_experiment(tracking.experiment, artifact_location=artifact_location(tracking))
    except OSError as e:
        raise ConfigError(f"tracking: the local MLflow store {db} cannot be written ({e}); nothing was computed. "
                          "Point tracking.uri at a writable store") from None


def flatten_config(resolved: Mapping) -> dict[str, str]:
    """``{"model.hidden_size": "128", ...}`` (``resolved``: ``Lab.resolved``) for MLflow params (values are strings
    there anyway)."""
    out: dict[str, str] = {}

    def walk(node, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            out[prefix[:-1]] = str(node)[:6000]

    walk(dict(resolved), "")
    return out


def git_commit(cwd: str | Path | None = None) -> str:
    """HEAD's commit, ``-dirty`` when tracked code or settings differ from it.

    ``dvc.lock`` and ``params.yaml`` do not count: DVC rewrites the lock after
    every stage of the run being recorded, and ``dvc exp run -S`` rewrites
    params.yaml from conf/ and the overrides (which the run records as params):
    counting them would mark every experiment dirty.
    """
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                             cwd=cwd).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/",
                                ":(exclude,top,glob)**/dvc.lock", ":(exclude,top,glob)**/params.yaml"],
                               capture_output=True, text=True, check=True, cwd=cwd).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")


def content_hash(path: str | Path) -> str:
    """SHA-256 over the relative names and bytes of every file under ``path``."""
    path = Path(path)
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def dvc_hashes(lock_file: str | Path = "dvc.lock") -> dict[str, str]:
    """``{out path: md5}`` for every stage output recorded in ``dvc.lock``."""
    try:
        lock = yaml.safe_load(Path(lock_file).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    out = {}
    for stage in (lock.get("stages") or {}).values():
        for o in stage.get("outs", []):
            if "md5" in o:
                out[o["path"]] = o["md5"]
    return out


def run_tags(inputs: Mapping[str, str | Path], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Tags for a run: git commit, and for each named input its content hash and DVC's md5 when recorded."""
    tags = {"git_commit": git_commit()}
    for env, tag in (("DVC_EXP_NAME", "dvc.exp_name"), ("DVC_EXP_BASELINE_REV", "dvc.baseline_rev")):
        if os.environ.get(env):  # set by `dvc exp run` (queued or not): the run's DVC experiment
            tags[tag] = os.environ[env]
    recorded = dvc_hashes()
    for name, p in inputs.items():
        tags[f"data.{name}.path"] = str(p)
        tags[f"data.{name}.sha256"] = content_hash(p)
        if str(p) in recorded:
            tags[f"data.{name}.dvc_md5"] = recorded[str(p)]
    tags.update(extra or {})
    return tags


def mlflow_logger(lab: Lab, run_name: str, tags: Mapping[str, str], run_id: str | None = None):
    """Lightning's MLflow logger with the resolved config logged as params; ``run_id`` continues a run.

    A continued run keeps its params (MLflow does not allow changing them); a
    setting that changed on resume, such as the device count, is recorded as a
    ``resumed.<key>`` tag instead.
    """
    from lightning.pytorch.loggers import MLFlowLogger

    tracking = lab.tracking
    tags = {"variant": lab.run.variant or "baseline", **tags}  # ablation runs compare by this tag in `mlflow ui`
    logger = MLFlowLogger(experiment_name=tracking.experiment, run_name=run_name,
                          tracking_uri=tracking_uri(tracking), tags=tags, run_id=run_id,
                          artifact_location=artifact_location(tracking))
    if logger.run_id is not None:  # rank zero: MLflow 3 opens a model-training experiment on its runs table
        logger.experiment.set_experiment_tag(logger.experiment_id, EXPERIMENT_KIND, "custom_model_development")
        if run_id is None:  # the resolved config, as one file beside the params (which MLflow cuts at 6,000 chars)
            logger.experiment.log_dict(logger.run_id, lab.resolved, "config.yaml")
    params = flatten_config(lab.resolved)
    if run_id is not None and logger.run_id is not None:  # rank zero, continuing a run
        before = logger.experiment.get_run(run_id).data.params
        for k, v in params.items():
            if k in before and before[k] != v:
                logger.experiment.set_tag(run_id, f"resumed.{k}", v)
        params = {k: v for k, v in params.items() if k not in before}
    logger.log_hyperparams(params)
    return logger


def known_run(tracking: TrackingSettings, run_id: str) -> bool:
    """Whether the tracking store holds ``run_id`` (a run recorded in another store, or an external folder, not)."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    if run_id.startswith("external:"):
        return False
    try:
        MlflowClient(tracking_uri(tracking)).get_run(run_id)
    except MlflowException:
        log.info("run %s is not in this tracking store: nothing is nested under it", run_id)
        return False
    return True


def record_grid(tracking: TrackingSettings, grid: str, metrics: Mapping[str, float], children: list[str],
                report_dir: Path, groups: Mapping[str, list[str]] | None = None) -> str:
    """The grid's run: the parent of every pretraining run of the grid, with the grid's numbers and its report.

    One run per grid and DVC experiment (``dvc.exp_name``; the workspace has its
    own), reused when the report is drawn again: its metrics are logged anew,
    its children become exactly ``children`` (the runs behind this report; a
    run it held from an earlier report is let go), and ``report/`` holds the
    report (open ``report/index.html`` from the run's artifacts). Children not
    in this store are skipped. ``groups`` (name -> runs, such as the learning-rate sweep's pilots) each get a run
    of their own under the grid's, holding those runs: one group the UI's compare view takes whole. Returns the
    grid run's id.
    """
    from mlflow.entities import Metric, RunStatus
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri(tracking))
    experiment = client.get_experiment_by_name(tracking.experiment)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(
        tracking.experiment, artifact_location=artifact_location(tracking))
    client.set_experiment_tag(experiment_id, EXPERIMENT_KIND, "custom_model_development")
    key = f"{grid}@{os.environ.get('DVC_EXP_NAME') or 'workspace'}"
    found = client.search_runs([experiment_id], f"tags.kind = 'grid' and tags.grid_key = '{key}'", max_results=1)
    tags = run_tags({}, {"kind": "grid", "grid": grid, "grid_key": key, "stage": "report"})
    if found:
        run_id = found[0].info.run_id
        for k, v in tags.items():
            client.set_tag(run_id, k, v)
    else:
        run_id = client.create_run(experiment_id, run_name=f"grid-{grid}", tags=tags).info.run_id
    now = int(time.time() * 1000)
    items = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
    for i in range(0, len(items), 1000):  # MLflow's batch limit
        client.log_batch(run_id, metrics=items[i:i + 1000])
    keep = {c for c in children if known_run(tracking, c)}
    for name, members in (groups or {}).items():
        keep.add(_group_run(client, experiment_id, run_id, f"{key}/{name}", f"{name}-{grid}",
                            [m for m in members if known_run(tracking, m)]))
    for c in keep:
        client.set_tag(c, PARENT, run_id)
    for r in client.search_runs([experiment_id], f"tags.`{PARENT}` = '{run_id}'"):
        if r.info.run_id not in keep:
            client.delete_tag(r.info.run_id, PARENT)
    client.log_artifacts(run_id, str(report_dir), "report")
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    return run_id


def _group_run(client, experiment_id: str, parent: str, key: str, name: str, members: list[str]) -> str:
    """A run holding ``members`` (its children, exactly those) under the grid run ``parent``; reused by ``key``."""
    from mlflow.entities import RunStatus

    found = client.search_runs([experiment_id], f"tags.kind = 'group' and tags.group_key = '{key}'", max_results=1)
    group = found[0].info.run_id if found else client.create_run(
        experiment_id, run_name=name, tags={"kind": "group", "group_key": key, PARENT: parent}).info.run_id
    for m in members:
        client.set_tag(m, PARENT, group)
    for r in client.search_runs([experiment_id], f"tags.`{PARENT}` = '{group}'"):
        if r.info.run_id not in members:
            client.delete_tag(r.info.run_id, PARENT)
    client.set_terminated(group, RunStatus.to_string(RunStatus.FINISHED))
    return group


def metric_history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]


def log_to_run(tracking: TrackingSettings, run_id: str, metrics: Mapping[str, float]) -> bool:
    """``metrics`` added to an existing run (a later stage's measures of a pretraining run, such as its zero-shot
    scores), so `mlflow ui` shows them beside its training curves; False (nothing logged) where the store does not
    hold the run."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    if not known_run(tracking, run_id):
        return False
    now = int(time.time() * 1000)
    items = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
    client = MlflowClient(tracking_uri(tracking))
    for i in range(0, len(items), 1000):  # MLflow's batch limit
        client.log_batch(run_id, metrics=items[i:i + 1000])
    return True
