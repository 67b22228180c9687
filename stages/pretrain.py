"""DVC stage pretrain: examples + tokenizer -> checkpoint, Hugging Face export, metrics."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.pretrain import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("pretrain", run, cfg)


if __name__ == "__main__":
    main()
