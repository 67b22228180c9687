"""The make_pairs stage: corpus + tokenizer -> ``paths.pairs``, statistics -> ``metrics/pairs.json``.

Across machines: ``runtime.parts=N runtime.part=i`` on machine ``i`` writes its share of the shards beside the
output; ``runtime.parts=N`` alone (``part`` null) then joins the N shares into the output, the same bytes as one
machine's run.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from pipeline.data.pairs import SPLITS, make_examples, part_dir
from pipeline.data.shards import merge_parts
from pipeline.data.tokenizer import load_tokenizer, special_ids
from pipeline.io import atomic_dir, write_json
from pipeline.settings import Lab


def run(lab: Lab) -> dict:
    out, pairs, runtime = Path(lab.paths.pairs), lab.pairs, lab.runtime
    parts, part = runtime.parts, runtime.part
    if parts > 1 and part is None:  # join the machines' shares
        with atomic_dir(out) as tmp:
            stats = {split: merge_parts([part_dir(out, i, parts) / split for i in range(parts)], tmp / split)
                     for split in SPLITS}
        for i in range(parts):
            part_dir(out, i, parts).rmdir()
        write_json(Path(lab.paths.metrics) / "pairs.json", stats)
        return stats
    tok = load_tokenizer(lab.paths.tokenizer)
    ids = special_ids(tok)
    workers = runtime.num_workers or len(os.sched_getaffinity(0))  # null: every core we may use
    share = (part, parts) if parts > 1 else None
    stats = {}
    with atomic_dir(part_dir(out, part, parts) if share else out) as tmp:
        for i, split in enumerate(SPLITS):
            stats[split] = make_examples(
                tok, Path(lab.paths.corpus) / f"{split}.txt", tmp / split,
                pairs if split == "train" else dataclasses.replace(pairs, dupe_factor=1), seed=lab.run.seed + i,
                cls_id=ids["cls"], sep_id=ids["sep"], num_workers=workers, progress=runtime.progress, part=share)
    if not share:
        write_json(Path(lab.paths.metrics) / "pairs.json", stats)
    return stats
