"""DVC stage make_pairs: corpus + tokenizer -> sharded, memory-mapped sentence pairs."""
from pathlib import Path

import hydra
from omegaconf import DictConfig

from pipeline.corpus import read_documents
from pipeline.io import atomic_dir, write_json
from pipeline.pairs import write_pairs
from pipeline.stage import run_stage
from pipeline.wordpiece import encode_documents, load_tokenizer, special_ids


def run(cfg: DictConfig) -> dict:
    tok = load_tokenizer(cfg.paths.tokenizer)
    ids = special_ids(tok)
    p = cfg.pairs
    stats = {}
    with atomic_dir(cfg.paths.pairs) as tmp:
        for i, split in enumerate(("train", "valid")):
            docs = list(encode_documents(tok, read_documents(Path(cfg.paths.corpus) / f"{split}.txt")))
            stats[split] = write_pairs(
                docs, tmp / split, cls_id=ids["cls"], sep_id=ids["sep"], vocab_size=tok.get_vocab_size(),
                max_seq_length=p.max_seq_length, short_seq_prob=p.short_seq_prob,
                dupe_factor=p.dupe_factor if split == "train" else 1, seed=cfg.seed + i,
                shard_size=p.shard_size, progress=cfg.runtime.progress)
    write_json(Path(cfg.paths.metrics) / "pairs.json", stats)
    return stats


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("make_pairs", run, cfg)


if __name__ == "__main__":
    main()
