"""Fine-tuning tasks: each loader returns a ``TaskData`` of labelled examples (``NerTask``: tagged sentences,
``SquadTask``: questions with answer spans)."""
from typing import Any, Callable, Mapping, Sequence

from pipeline.errors import ConfigError
from pipeline.finetune.tasks.base import DEFAULT_METRICS, METRICS, Example, TaskData, chosen_metrics, score
from pipeline.finetune.tasks.bible import bible_sections, verse_next, word_order
from pipeline.finetune.tasks.glue import GLUE_TASKS, glue
from pipeline.finetune.tasks.hf import hf_dataset
from pipeline.finetune.tasks.conll import NER_METRICS, NerTask, conll
from pipeline.finetune.tasks.squad import METRICS as SQUAD_METRICS, SquadTask, squad
from pipeline.finetune.tasks.table import table
from pipeline.settings import SuiteSettings


def _declared(data: Mapping[str, Any]) -> list[str]:  # table and hf_dataset: task.data.metrics, or their default
    return chosen_metrics(data.get("metrics"), bool(data.get("regression")))


# What each of the lab's loaders (task.data._target_) will report, from its settings alone: the suite's columns
# are checked against it at start-up. None: not known before the data is read (checked at report time).
_REPORTS: dict[str, Callable[[Mapping[str, Any]], Sequence[str] | None]] = {
    "pipeline.finetune.tasks.glue": lambda d: GLUE_TASKS[d["name"]].metrics if d.get("name") in GLUE_TASKS else None,
    "pipeline.finetune.tasks.squad": lambda d: SQUAD_METRICS.get(str(d.get("version"))),
    "pipeline.finetune.tasks.conll": lambda d: NER_METRICS,
    "pipeline.finetune.tasks.table": _declared,
    "pipeline.finetune.tasks.hf_dataset": _declared,
    "pipeline.finetune.tasks.bible_sections": lambda d: DEFAULT_METRICS,
    "pipeline.finetune.tasks.word_order": lambda d: DEFAULT_METRICS,
    "pipeline.finetune.tasks.verse_next": lambda d: DEFAULT_METRICS,
}


def reported_metrics(data: Mapping[str, Any]) -> list[str] | None:
    """The metrics a task with these ``task.data`` settings reports (the first is its headline), or None where
    only its data can tell (a loader from elsewhere)."""
    found = _REPORTS.get(str(data.get("_target_")), lambda d: None)(data)
    return None if found is None else list(found)


def check_columns(suite: SuiteSettings) -> None:
    """Each column of a suite asks for a metric its task's loader reports (a loader from elsewhere: checked when
    the report reads its results)."""
    for i, col in enumerate(suite.columns):
        reports = reported_metrics(suite.tasks[col.task].data)
        if col.metric is not None and reports is not None and col.metric not in reports:
            raise ConfigError(f"suite.columns[{i}].metric={col.metric!r} is not allowed: expected one of the "
                              f"metrics task {col.task} reports ({', '.join(reports)})")


__all__ = ["METRICS", "Example", "TaskData", "score", "bible_sections", "word_order", "verse_next", "glue", "GLUE_TASKS", "table", "NerTask",
           "conll", "hf_dataset", "SquadTask", "squad", "reported_metrics", "check_columns"]
