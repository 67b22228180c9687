"""DVC stage finetune: pretrained export + task data -> metrics per mode and seed."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.finetune import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("finetune", run, cfg)


if __name__ == "__main__":
    main()
