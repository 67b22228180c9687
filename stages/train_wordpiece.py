"""DVC stage train_wordpiece: corpus train split -> vocab.txt + tokenizer.json."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.train_wordpiece import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("train_wordpiece", run, cfg)


if __name__ == "__main__":
    main()
