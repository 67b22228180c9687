"""DVC stage zero_shot: one pretraining run's export -> <metrics>/zero_shot.json (BLiMP, zero-shot)."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.zero_shot import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("zero_shot", run, cfg)


if __name__ == "__main__":
    main()
