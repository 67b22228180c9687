"""Where a pretraining run keeps its checkpoints, so a killed run resumes when rerun.

A run's folder is ``<checkpoints>/<run key>``: the key hashes what makes the run
itself (its settings and input data, not speed or placement), so a rerun of the
same run finds its ``last.ckpt`` and the MLflow run id it was recording into.
Checkpoints are written to a temporary file and renamed, and read with
``weights_only=True``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from pipeline.errors import TrainingError
from pipeline.tracking import content_hash

# Where a run runs, not what it computes: a checkpoint written on 2 devices resumes on 1 and back.
PLACEMENT = ("max_time", "accelerator", "devices", "strategy", "num_nodes")


def run_key(settings: dict, seed: int, pairs_dir: str | Path, tokenizer_dir: str | Path) -> str:
    """A hash of what makes a pretraining run itself: ``settings`` (objective, model, optim, masking,
    trainer; the trainer's placement keys are dropped), the seed, and its examples and tokenizer."""
    parts = dict(settings)
    parts["trainer"] = {k: v for k, v in settings["trainer"].items() if k not in PLACEMENT}
    parts["seed"] = seed
    for split in ("train", "valid"):
        meta = Path(pairs_dir) / split / "meta.json"
        parts[f"pairs.{split}"] = hashlib.sha256(meta.read_bytes()).hexdigest() if meta.exists() else None
    parts["tokenizer"] = content_hash(Path(tokenizer_dir) / "tokenizer.json")
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def checkpoint_step(path: Path) -> int:
    """The step a checkpoint was saved at; a clear error naming the file if torch cannot read it.

    Loaded as Lightning loads it, with ``weights_only=True`` (no arbitrary unpickling).
    """
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        ckpt["state_dict"]
        return int(ckpt["global_step"])
    except Exception as e:  # noqa: BLE001 (any failure to read means the same thing here)
        raise TrainingError(f"{path}: checkpoint cannot be read ({type(e).__name__}: {e}); "
                            "delete it to start this run over") from None


class RunFolder:
    """One run's checkpoint folder: the checkpoint to resume from, if any, and the MLflow run it continues."""

    def __init__(self, root: str | Path, key: str):
        self.path = Path(root) / key
        self.path.mkdir(parents=True, exist_ok=True)
        last = self.path / "last.ckpt"
        self.resume = last if last.exists() else None
        self.resumed_step = checkpoint_step(last) if self.resume else None
        run_file = self.path / "mlflow_run_id"
        self.run_id = run_file.read_text().strip() if self.resume and run_file.exists() else None

    def remember_run(self, run_id: str) -> None:
        (self.path / "mlflow_run_id").write_text(run_id + "\n")

    def remove(self) -> None:
        """The run finished: its output holds the final checkpoint."""
        shutil.rmtree(self.path, ignore_errors=True)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints written to a temporary file and renamed: a kill never leaves a truncated ``last.ckpt``."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            super().save_checkpoint(checkpoint, tmp, storage_options)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
