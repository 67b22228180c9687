"""Atomic output: a stage either leaves a complete output or none at all.

Everything is written under a temporary sibling path and renamed into place,
so DVC can never cache a half-written file or folder.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from pipeline.errors import DataError, MissingFileError


def _tmp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _remove_stale_siblings(path: Path) -> None:
    """Remove temporaries of ``path`` left by killed processes (their pid no longer runs)."""
    for p in path.parent.glob(f".{path.name}.tmp-*"):
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_error(path: Path, e: OSError) -> DataError:
    """A failed write (a full disk, a file-size limit, a read-only folder) as one clear line naming ``path``."""
    return DataError(f"{path}: could not be written ({e.strerror or e}{f': {e.filename}' if e.filename else ''}); "
                     "nothing was replaced: an earlier complete output is kept")


WRITE_ERRORS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary folder that replaces ``path`` when the block succeeds.

    On an exception the temporary folder is removed and an existing ``path``
    (an earlier complete output) is left untouched; a write that fails for
    lack of space or permission becomes a ``DataError`` naming ``path``.
    """
    path = Path(path)
    tmp = _tmp_sibling(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_siblings(path)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    except OSError as e:
        raise _write_error(path, e) from e
    try:
        yield tmp
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if e.errno in WRITE_ERRORS:
            raise _write_error(path, e) from e
        raise
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
    tmp = _tmp_sibling(path)
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_siblings(path)
        with open(tmp, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if e.errno in WRITE_ERRORS:
            raise _write_error(path, e) from e
        raise
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
        raise MissingFileError(f"{path}: file not found (has the stage that writes it run?)") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e})") from None


def read_versioned(path: str | os.PathLike, key: str, expected: int, missing_hint: str, stale_hint: str) -> dict:
    """A JSON metadata file whose ``key`` must equal ``expected``; a clear error naming it otherwise."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: not found ({missing_hint})")
    meta = json.loads(path.read_text(encoding="utf-8"))
    if meta.get(key) != expected:
        raise DataError(f"{path}: {key} {meta.get(key)!r}, this code reads {expected}; {stale_hint}")
    return meta
