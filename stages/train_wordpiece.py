"""DVC stage train_wordpiece: corpus train split -> vocab.txt + tokenizer.json."""
from pathlib import Path

import hydra
from omegaconf import DictConfig

from pipeline.corpus import read_documents
from pipeline.io import write_json
from pipeline.stage import run_stage
from pipeline.wordpiece import load_tokenizer, train_wordpiece, tokenizer_stats


def run(cfg: DictConfig) -> dict:
    corpus = Path(cfg.paths.corpus)
    sentences = (s for doc in read_documents(corpus / "train.txt") for s in doc)
    t = cfg.tokenizer
    stats = train_wordpiece(sentences, cfg.paths.tokenizer, vocab_size=t.vocab_size, min_frequency=t.min_frequency,
                            limit_alphabet=t.limit_alphabet, lowercase=t.lowercase, strip_accents=t.strip_accents,
                            progress=cfg.runtime.progress)
    stats.update(tokenizer_stats(load_tokenizer(cfg.paths.tokenizer), read_documents(corpus / "valid.txt")))
    write_json(Path(cfg.paths.metrics) / "tokenizer.json", stats)
    return stats


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("train_wordpiece", run, cfg)


if __name__ == "__main__":
    main()
