"""DVC stage make_pairs: corpus + tokenizer -> sharded, memory-mapped pretraining examples."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.make_pairs import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("make_pairs", run, cfg)


if __name__ == "__main__":
    main()
