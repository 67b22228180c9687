"""Fine-tuning tasks: each loader returns a ``TaskData`` of labelled examples."""
from pipeline.tasks.base import METRICS, Example, TaskData, score
from pipeline.tasks.bible import bible_sections
from pipeline.tasks.glue import GLUE_TASKS, glue
from pipeline.tasks.hf import hf_dataset
from pipeline.tasks.ner import NerTask, conll
from pipeline.tasks.table import table

__all__ = ["METRICS", "Example", "TaskData", "score", "bible_sections", "glue", "GLUE_TASKS", "table", "NerTask",
           "conll", "hf_dataset"]
