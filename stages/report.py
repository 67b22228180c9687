"""DVC stage report: metrics and curves of every run -> reports/ (HTML, Markdown, figures, JSON)."""
import hydra
from omegaconf import DictConfig

from pipeline.stage import run_stage
from pipeline.stages.report import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("report", run, cfg)


if __name__ == "__main__":
    main()
