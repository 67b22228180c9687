"""DVC stage zero_shot_floor: the pretraining text -> metrics/zero_shot_floor.json (BLiMP's n-gram floor, once per grid)."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.zero_shot_floor import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("zero_shot_floor", run, cfg)


if __name__ == "__main__":
    main()
