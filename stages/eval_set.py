"""DVC stage eval_set: the baseline's valid examples -> the fixed evaluation set and the count-based floors."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.eval_set import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("eval_set", run, cfg)


if __name__ == "__main__":
    main()
