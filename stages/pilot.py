"""DVC stage pilot: one (row, peak learning rate) of the grid's learning-rate sweep -> pilot.json, no model."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.pilot import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("pilot", run, cfg)


if __name__ == "__main__":
    main()
