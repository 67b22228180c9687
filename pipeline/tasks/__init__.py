"""Fine-tuning tasks: each loader returns a ``TaskData`` of labelled examples."""
from pipeline.tasks.base import Example, TaskData
from pipeline.tasks.bible import bible_sections
from pipeline.tasks.glue import glue

__all__ = ["Example", "TaskData", "bible_sections", "glue"]
