"""DVC stage prepare_corpus: a corpus source -> train/valid documents + statistics."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.prepare_corpus import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("prepare_corpus", run, cfg)


if __name__ == "__main__":
    main()
