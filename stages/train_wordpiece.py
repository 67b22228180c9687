"""DVC stage train_wordpiece: corpus train split -> vocab.txt + tokenizer.json."""
from pathlib import Path

import hydra
from omegaconf import DictConfig

from pipeline.corpus import Sentences, read_documents
from pipeline.io import write_json
from pipeline.stage import run_stage
from pipeline.wordpiece import load_tokenizer, save_tokenizer, tokenizer_settings, tokenizer_stats, train_wordpiece


def run(cfg: DictConfig) -> dict:
    corpus = Path(cfg.paths.corpus)
    t = cfg.tokenizer
    if t.get("from_folder"):
        # A published vocabulary (e.g. a local bert-base-uncased), to pretrain from its weights.
        tok = load_tokenizer(t.from_folder)
        lowercase, strip_accents = tokenizer_settings(t.from_folder)
        save_tokenizer(tok, cfg.paths.tokenizer, lowercase=lowercase, strip_accents=strip_accents)
        stats = {"vocab_size": tok.get_vocab_size(), "from_folder": str(t.from_folder)}
    else:
        stats = train_wordpiece(Sentences(corpus / "train.txt"), cfg.paths.tokenizer, vocab_size=t.vocab_size,
                                min_frequency=t.min_frequency, limit_alphabet=t.limit_alphabet,
                                lowercase=t.lowercase, strip_accents=t.strip_accents, progress=cfg.runtime.progress)
    stats.update(tokenizer_stats(load_tokenizer(cfg.paths.tokenizer), read_documents(corpus / "valid.txt")))
    write_json(Path(cfg.paths.metrics) / "tokenizer.json", stats)
    return stats


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("train_wordpiece", run, cfg)


if __name__ == "__main__":
    main()
