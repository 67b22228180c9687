"""The pilot stage: one (row, peak learning rate) of the grid's learning-rate sweep (``pipeline.sweep``), the
pretrain stage's run shortened to the sweep's share of the steps, scored on the fixed set, with no export
(``pipeline.stages.pretrain.run_pilot``)."""
from __future__ import annotations

from pipeline.settings import Lab
from pipeline.stages import pretrain


def run(lab: Lab) -> dict:
    return pretrain.run(lab)  # pilot_lr is set: apply_variant refuses the pilot stage without it
