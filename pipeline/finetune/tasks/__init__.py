"""Fine-tuning tasks: each loader returns a ``TaskData`` of labelled examples (``NerTask``: tagged sentences,
``SquadTask``: questions with answer spans)."""
from pipeline.finetune.tasks.base import METRICS, Example, TaskData, score
from pipeline.finetune.tasks.bible import bible_sections
from pipeline.finetune.tasks.glue import GLUE_TASKS, glue
from pipeline.finetune.tasks.hf import hf_dataset
from pipeline.finetune.tasks.conll import NerTask, conll
from pipeline.finetune.tasks.squad import SquadTask, squad
from pipeline.finetune.tasks.table import table

__all__ = ["METRICS", "Example", "TaskData", "score", "bible_sections", "glue", "GLUE_TASKS", "table", "NerTask",
           "conll", "hf_dataset", "SquadTask", "squad"]
