"""DVC stage report: MLflow runs + metrics -> reports/ (HTML, Markdown, figures)."""
import hydra
from omegaconf import DictConfig

from pipeline.report import build_report
from pipeline.stage import run_stage


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return run_stage("report", build_report, cfg)


if __name__ == "__main__":
    main()
