"""Where the configuration lives (``conf/``, beside the package) and its fingerprint (torch-free)."""
from __future__ import annotations

import hashlib
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def conf_hash(conf_dir: Path = CONF_DIR) -> str:
    """A fingerprint of conf/: every YAML file's path and bytes. params.yaml records the one it was composed
    from (``conf_hash``), so a stage can tell that conf/ was edited since (``pipeline.config.check_fresh``)."""
    h = hashlib.sha256()
    for f in sorted(Path(conf_dir).rglob("*.yaml")):
        h.update(f.relative_to(conf_dir).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]
