"""Which family tables the report can show: ``families/<name>.yaml`` beside this file, one per family (title,
question, rows, the paper's numbers). Light (no numpy, scipy or torch), so the start-up validator checks
``grid.families`` here before any compute; the report reads the specs (``results.load_families``)."""
from __future__ import annotations

from pathlib import Path

from pipeline.errors import ConfigError

FAMILIES = Path(__file__).resolve().parent / "families"


def check_families(names: list[str], folder: Path = FAMILIES) -> None:
    """Every name in ``names`` (``grid.families``) has a table spec in ``folder``."""
    known = sorted(p.stem for p in folder.glob("*.yaml"))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"grid.families: {unknown} not defined: expected names from {folder} ({', '.join(known)})")
