"""The names a setting may take, each defined once, and the constants every layer shares (torch-free).

The settings (``pipeline.settings``) check a value against these; the code that acts on a name imports it from
here, so the floor that checks settings needs nothing from the floors that use them.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.errors import ConfigError

# pairs.format: BERT's sentence pairs, or sequences packed from one document / across documents (RoBERTa)
FORMATS = ("nsp_pairs", "doc_sentences", "full_sentences")
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0-4 of every vocabulary trained here
IGNORE_INDEX = -100  # the label of a position that is not predicted (cross-entropy's ignore_index)

OPTIMIZERS = ("adamw", "lamb")  # optim.name
SCHEDULES = ("linear", "wsd")    # optim.schedule

# finetune.modes (``pipeline.finetune.modes`` says what each trains)
FEATURE_SETS = ("embeddings", "last", "second_to_last", "sum_last_four", "concat_last_four", "weighted")
FROZEN = "frozen_"
CLASSICAL = "tfidf"
MODES = ("pretrained", "scratch", CLASSICAL, *(f"{FROZEN}{f}" for f in FEATURE_SETS))
# finetune.poolings: how a sentence task's network sums up a text. ``token``: the architecture's summary token
# ([CLS] in BERT; a left-to-right model's last real token, which has read the whole text, as GPT classifies),
# through the pooler when fine-tuning; ``mean``: the mean of the states over the text's real tokens.
POOLINGS = ("token", "mean")
# Modes whose result does not depend on the pretrained weights: run once, with a variant's first pretraining seed.
SEED_FREE = ("scratch", CLASSICAL)

# grid.families: the report's family tables, ``families/<name>.yaml`` (title, question, rows, the paper's numbers)
FAMILIES = Path(__file__).resolve().parent / "report" / "families"


def check_families(names: list[str], folder: Path = FAMILIES) -> None:
    """Every name in ``names`` (``grid.families``) has a table spec in ``folder``."""
    known = sorted(p.stem for p in folder.glob("*.yaml"))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"grid.families: {unknown} not defined: expected names from {folder} ({', '.join(known)})")
