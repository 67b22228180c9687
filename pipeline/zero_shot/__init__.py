"""Zero-shot evaluation: every pretraining run scored on BLiMP's minimal pairs, with no training at all.

``blimp`` reads the paradigms and the published numbers and turns per-pair verdicts into the paper's
summaries; ``score`` gives each generation of the lineage a sentence log-likelihood of its own kind.
"""
