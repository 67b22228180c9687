"""DVC stage pilot: one (row, peak learning rate) of the grid's learning-rate sweep -> its fixed-set score.

The pretrain stage's run, shorter and without an export (``pipeline.sweep``); ``pilot_lr`` is required."""
import hydra
from omegaconf import DictConfig

from pipeline.errors import ConfigError
from pipeline.stage import run_stage
from pipeline.stages.pretrain import run


def pilot(lab):
    if lab.run.pilot_lr is None:
        raise ConfigError("pilot_lr is null: expected the pilot's peak learning rate (pilot_lr=3e-4), one of "
                          "grid.sweep.lrs; a full run is the pretrain stage's")
    return run(lab)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("pretrain", pilot, cfg)


if __name__ == "__main__":
    main()
