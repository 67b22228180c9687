from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
# The BERT size the model tests use: every part present, milliseconds per step.
TINY_BERT = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=64)


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test when it is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


def run_stage(stage: str, *overrides: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run ``python -m stages.<stage>`` with Hydra overrides, as a person would."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run([sys.executable, "-m", f"stages.{stage}", *overrides], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
