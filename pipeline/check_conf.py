"""The check_conf stage (``python -m pipeline.check_conf``), before any other stage spends compute: params.yaml
composed from conf/ as it is now, every setting valid (``pipeline.config.validate``) with each variant of the
grid applied too, and the rules that need the task loaders: each suite column's metric one its task reports. And
the ledger's claims (``pipeline/report/claims.yaml``): each states its practical margin, in a unit that fits what
it reads, before any training (the report would otherwise refuse it only after the whole grid has run).

A module of its own so that only this stage depends on the task loaders' code: editing a loader reruns the
check and the fine-tuning, not the corpus or the tokenizer.
"""
from __future__ import annotations

import sys
from pathlib import Path

import psutil
from omegaconf import OmegaConf

from pipeline.conf import CONF_DIR
from pipeline.config import check_fresh, validate
from pipeline.errors import ConfigError, LabError
from pipeline.finetune.tasks import check_columns
from pipeline.model_config import ModelConfig, build_config
from pipeline.report.claims import CLAIMS
from pipeline.report.claims import load as load_claims
from pipeline.settings import Lab
from pipeline.variants import apply_variant

GIB = 1 << 30


def check_params(params: Path = CONF_DIR.parent / "params.yaml", conf_dir: Path = CONF_DIR,
                 claims: Path = CLAIMS) -> None:
    """The ledger's ``claims`` (their margins), then ``params`` composed from conf/ as it is now and its settings
    valid, with each variant of the grid applied too (its own stages would only find a bad setting of its after the
    baseline's compute)."""
    load_claims(claims)
    cfg = OmegaConf.load(params)
    check_fresh(cfg, conf_dir)
    settings = validate(cfg)
    if settings.suite:
        check_columns(settings.suite)
    memory = device_memory(settings)
    check_memory(settings, "the baseline", memory)
    for variant in cfg.grid.pretrain if "grid" in cfg else ():
        check_memory(validate(apply_variant(OmegaConf.merge(cfg, {"variant": variant}), "pretrain", swept=False)),
                     f"variant {variant}", memory)


def device_memory(lab: Lab) -> tuple[int, str, int]:
    """The memory one training process has, in bytes, where it is, and how many such devices the machine has: the
    first GPU's where the trainer runs on GPUs (``trainer.accelerator`` other than cpu, and a GPU present), else
    the machine's RAM."""
    if lab.trainer and lab.trainer.accelerator != "cpu":
        import torch  # only here: the check otherwise starts without it

        if torch.cuda.is_available():
            return (torch.cuda.get_device_properties(0).total_memory, f"GPU {torch.cuda.get_device_name(0)}",
                    torch.cuda.device_count())
    return psutil.virtual_memory().total, "RAM", 1


def pretraining_memory(config: ModelConfig, batch: int, length: int) -> tuple[int, int] | None:
    """About how many bytes pretraining a Transformer of ``config`` takes in fp32 with AdamW (weights, gradients
    and two moments: 16 bytes a parameter, and the activations backward keeps for ``batch`` x ``length`` pieces),
    and its parameter count; None for a model without Transformer layers (word2vec, ELMo: small at any setting
    a config takes). The attention scores of every head count only with attention dropout, which takes the
    unfused path that keeps them."""
    H, I = getattr(config, "hidden_size", None), getattr(config, "intermediate_size", None)
    L, heads = getattr(config, "num_hidden_layers", 0), getattr(config, "num_attention_heads", None)
    if not (H and I and L and heads):
        return None
    V, P = config.vocab_size, getattr(config, "max_position_embeddings", length)
    params = (V + P + 2) * H + L * (4 * H * H + 2 * H * I + 9 * H + I) + H * H + V
    scores = 2 * heads * length if getattr(config, "attention_probs_dropout_prob", 0.0) else 0
    per_piece = L * (11 * H + 2 * I + scores) + V  # floats kept per piece; the LM head's logits
    return 16 * params + 4 * batch * length * per_piece, params


def check_memory(lab: Lab, name: str, memory: tuple[int, str, int]) -> None:
    """Refuse, in one line naming the run, a model that cannot be pretrained in ``memory`` (``device_memory``)."""
    if not (lab.model and lab.trainer and lab.pairs and lab.tokenizer):
        return
    config = build_config(lab.model.values(), lab.tokenizer.vocab_size, lab.objective.lm if lab.objective else None)
    batch = lab.trainer.device_batch_size(found=memory[2])
    need = pretraining_memory(config, batch, lab.pairs.max_seq_length)
    if need and need[0] > memory[0]:
        raise ConfigError(f"{name} cannot be pretrained here: model {lab.model.name} ({need[1] / 1e6:,.0f}M "
                          f"parameters) needs about {need[0] / GIB:,.0f} GiB for {batch} x {lab.pairs.max_seq_length} "
                          f"pieces a step, more than the {memory[0] / GIB:,.0f} GiB of {memory[1]}: drop it from "
                          "grid.pretrain, or lower trainer.batch_size (or raise trainer.accumulate_grad_batches)")


def main(claims: Path = CLAIMS) -> None:
    """The stage: every check, or one line naming what is wrong and exit status 2."""
    try:
        check_params(claims=claims)
        print("params.yaml is composed from conf/ as it is, its settings are valid, and every claim states its margin")
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
