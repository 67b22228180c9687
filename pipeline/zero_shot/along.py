"""BLiMP along pretraining: the network being pretrained scored zero-shot at every validation, on the first
``zero_shot.along.pairs`` pairs of each paradigm, so the report can draw when grammar appears beside the fixed
set's learning curves and the MLM floors.

Scored the way its exports are (its architecture's ``scorer``, ``pipeline.architectures``; a masked LM by
token-level PLL)
over every paradigm, each sentence up to the model's positions. Scoring reads the network in eval mode under
``torch.inference_mode`` and draws no random numbers, so training is the same with it or without it.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from tokenizers import Tokenizer
from torch import nn

from pipeline.settings import ZeroShotSettings
from pipeline.zero_shot.blimp import Paradigm, load
from pipeline.zero_shot.score import evaluate
from pipeline.zero_shot.scorers import NoSentenceScore, SentenceScorer

log = logging.getLogger(__name__)
# An architecture's ``scorer``: (network, tokenizer, *, pll, batch_size) -> its sentence scorer, or none
ScorerOf = Callable[..., SentenceScorer | NoSentenceScore]


class AlongPretraining:
    """``along(network)`` -> its BLiMP overall accuracy (the mean over paradigms, a fraction) on a fixed subset."""

    def __init__(self, scorer: ScorerOf, tokenizer: Tokenizer, paradigms: list[Paradigm], batch_size: int):
        self.scorer, self.tokenizer, self.paradigms, self.batch_size = scorer, tokenizer, paradigms, batch_size

    def __call__(self, network: nn.Module) -> float | None:
        network = getattr(network, "_orig_mod", network)  # torch.compile's wrapper
        scorer = self.scorer(network, self.tokenizer, pll="token", batch_size=self.batch_size)
        if isinstance(scorer, NoSentenceScore):
            return None
        start = time.perf_counter()
        overall = evaluate(scorer, self.tokenizer, self.paradigms).summary()["overall"]
        log.info("BLiMP along pretraining: %.1f%% on %d pairs in %.1f s", 100 * overall,
                 sum(len(p) for p in self.paradigms), time.perf_counter() - start)
        return overall


def along_pretraining(settings: ZeroShotSettings, scorer: ScorerOf, tokenizer: Tokenizer,
                      baseline: bool) -> AlongPretraining | None:
    """The scorer of a baseline run's pretraining when ``zero_shot.along.data`` is set; else None."""
    if not baseline or settings.along.data is None:
        return None
    return AlongPretraining(scorer, tokenizer, load(settings.along.data, None, settings.along.pairs),
                            settings.batch_size)
