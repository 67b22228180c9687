"""DVC stage make_pairs: corpus + tokenizer -> sharded, memory-mapped pretraining examples.

Across machines: ``runtime.parts=N runtime.part=i`` on machine ``i`` writes its
share of the shards beside the output; ``runtime.parts=N`` alone (``part`` null)
then joins the N shares into the output, the same bytes as one machine's run.
"""
from pathlib import Path

import hydra
from omegaconf import DictConfig

from pipeline.errors import ConfigError
from pipeline.io import atomic_dir, write_json
from pipeline.pairs import make_examples
from pipeline.shards import merge_parts
from pipeline.stage import run_stage, worker_count
from pipeline.wordpiece import load_tokenizer, special_ids


SPLITS = ("train", "valid")


def part_dir(out: Path, i: int, n: int) -> Path:
    return out.with_name(f"{out.name}.part-{i}-of-{n}")


def run(cfg: DictConfig) -> dict:
    out = Path(cfg.paths.pairs)
    parts, part = cfg.runtime.get("parts", 1), cfg.runtime.get("part")
    if part is not None and not (isinstance(part, int) and 0 <= part < parts):
        raise ConfigError(f"runtime.part={part!r} is not allowed: expected an integer in [0, runtime.parts={parts})")
    if parts > 1 and part is None:  # join the machines' shares
        with atomic_dir(out) as tmp:
            stats = {split: merge_parts([part_dir(out, i, parts) / split for i in range(parts)], tmp / split)
                     for split in SPLITS}
        for i in range(parts):
            part_dir(out, i, parts).rmdir()
        write_json(Path(cfg.paths.metrics) / "pairs.json", stats)
        return stats
    tok = load_tokenizer(cfg.paths.tokenizer)
    ids = special_ids(tok)
    p = cfg.pairs
    stats = {}
    share = (part, parts) if parts > 1 else None
    with atomic_dir(part_dir(out, part, parts) if share else out) as tmp:
        for i, split in enumerate(SPLITS):
            stats[split] = make_examples(
                tok, Path(cfg.paths.corpus) / f"{split}.txt", tmp / split, cls_id=ids["cls"], sep_id=ids["sep"],
                format=p.format, max_seq_length=p.max_seq_length, short_seq_prob=p.short_seq_prob,
                dupe_factor=p.dupe_factor if split == "train" else 1, seed=cfg.seed + i,
                shard_tokens=p.shard_tokens, num_workers=worker_count(cfg), progress=cfg.runtime.progress, part=share)
    if not share:
        write_json(Path(cfg.paths.metrics) / "pairs.json", stats)
    return stats


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("make_pairs", run, cfg)


if __name__ == "__main__":
    main()
