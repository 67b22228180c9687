"""DVC stage probe: each row's first pretrained model + the corpus -> metrics/probe.json (polysemy, measured)."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.probe import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("probe", run, cfg)


if __name__ == "__main__":
    main()
