"""Atomic output: a stage either leaves a complete output or none at all.

Everything is written under a temporary sibling path and renamed into place,
so DVC can never cache a half-written file or folder.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from pipeline.errors import DataError


def _tmp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary folder that replaces ``path`` when the block succeeds.

    On an exception the temporary folder is removed and an existing ``path``
    (an earlier complete output) is left untouched.
    """
    path = Path(path)
    tmp = _tmp_sibling(path)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[Any]:
    """Open a temporary sibling of ``path`` for writing; rename it over ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_sibling(path)
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    try:
        with open(tmp, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def write_json(path: str | os.PathLike, data: Any) -> None:
    with atomic_file(path) as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: file not found (has the stage that writes it run?)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None


def read_versioned(path: str | os.PathLike, key: str, expected: int, missing_hint: str, stale_hint: str) -> dict:
    """A JSON metadata file whose ``key`` must equal ``expected``; a clear error naming it otherwise."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: not found ({missing_hint})")
    meta = json.loads(path.read_text(encoding="utf-8"))
    if meta.get(key) != expected:
        raise DataError(f"{path}: {key} {meta.get(key)!r}, this code reads {expected}; {stale_hint}")
    return meta
