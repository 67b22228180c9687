"""DVC stage make_pairs: corpus + tokenizer -> sharded, memory-mapped pretraining examples."""
from pathlib import Path

import hydra
from omegaconf import DictConfig

from pipeline.io import atomic_dir, write_json
from pipeline.pairs import make_examples
from pipeline.stage import run_stage, worker_count
from pipeline.wordpiece import load_tokenizer, special_ids


def run(cfg: DictConfig) -> dict:
    tok = load_tokenizer(cfg.paths.tokenizer)
    ids = special_ids(tok)
    p = cfg.pairs
    stats = {}
    with atomic_dir(cfg.paths.pairs) as tmp:
        for i, split in enumerate(("train", "valid")):
            stats[split] = make_examples(
                tok, Path(cfg.paths.corpus) / f"{split}.txt", tmp / split, cls_id=ids["cls"], sep_id=ids["sep"],
                format=p.format, max_seq_length=p.max_seq_length, short_seq_prob=p.short_seq_prob,
                dupe_factor=p.dupe_factor if split == "train" else 1, seed=cfg.seed + i,
                shard_tokens=p.shard_tokens, num_workers=worker_count(cfg), progress=cfg.runtime.progress)
    write_json(Path(cfg.paths.metrics) / "pairs.json", stats)
    return stats


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("make_pairs", run, cfg)


if __name__ == "__main__":
    main()
