"""DVC stage prepare_corpus: a corpus source -> train/valid documents + statistics."""
from pathlib import Path

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig

from pipeline.corpus import prepare_corpus
from pipeline.io import write_json
from pipeline.stage import run_stage


def run(cfg: DictConfig) -> dict:
    documents = instantiate(cfg.corpus.source, _convert_="all")
    stats = prepare_corpus(documents, cfg.paths.corpus, valid_fraction=cfg.corpus.valid_fraction,
                           seed=cfg.seed, name=cfg.corpus.name, progress=cfg.runtime.progress)
    write_json(Path(cfg.paths.metrics) / "corpus.json", stats)
    return stats


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("prepare_corpus", run, cfg)


if __name__ == "__main__":
    main()
