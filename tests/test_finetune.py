"""Fine-tuning modes: frozen-feature heads and their pooled features."""
from __future__ import annotations

import lightning.pytorch as L
import pytest
import torch

from pipeline.finetune.heads import FeatureHead, pooled_states
from pipeline.finetune.training import Finetuning, summarize
from pipeline.model.bert import BertConfig, BertModel
from pipeline.model.downstream import Encoder
from pipeline.names import FEATURE_SETS


def test_pooled_states_average_real_tokens_of_every_layer():
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                                 intermediate_size=32))
    data = [{"input_ids": [2, 7, 8, 3], "token_type_ids": [0, 0, 0, 0], "label": 1},
            {"input_ids": [2, 9, 3], "token_type_ids": [0, 0, 0], "label": 0}]
    states = pooled_states(Encoder(model), data)
    assert states["mean"].shape == states["token"].shape == (2, 4, 16)  # embeddings + 3 layers
    with torch.no_grad():
        alone = model(torch.tensor([[2, 9, 3]]), output_hidden_states=True).hidden_states
    torch.testing.assert_close(states["mean"][1], torch.stack([h[0].mean(0) for h in alone]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(states["token"][1], torch.stack([h[0, 0] for h in alone]), atol=1e-5, rtol=1e-5)
    causal = pooled_states(Encoder(model), data, causal=True)["token"]  # a left-to-right model's last real token
    torch.testing.assert_close(causal[1], torch.stack([h[0, -1] for h in alone]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("feature_set", FEATURE_SETS)
def test_every_feature_set_selects_the_paper_s_layers(feature_set):
    torch.manual_seed(0)
    head = FeatureHead(feature_set, n_states=13, hidden=8, num_outputs=3)
    states = torch.randn(5, 13, 8)  # a 12-layer model: embeddings + 12 layers
    f = head.features(states)
    expected = {"embeddings": states[:, 0], "last": states[:, 12], "second_to_last": states[:, 11],
                "sum_last_four": states[:, 9:].sum(1), "concat_last_four": states[:, 9:].flatten(1),
                "weighted": states.mean(1)}[feature_set]  # the weighted mix starts uniform, scale 1
    torch.testing.assert_close(f, expected)
    assert head(states).shape == (5, 3)


def test_the_weighted_mix_learns_which_layer_carries_the_signal():
    torch.manual_seed(0)
    states = torch.randn(512, 5, 8)
    labels = (states[:, 3, 0] > 0).long()  # only layer 3 knows the answer
    head = FeatureHead("weighted", n_states=5, hidden=8, num_outputs=2, dropout=0.0)
    opt = torch.optim.Adam(head.parameters(), lr=0.05)
    for _ in range(300):
        loss = torch.nn.functional.cross_entropy(head(states), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    weights = torch.softmax(head.layer_logits, 0)
    assert int(weights.argmax()) == 3 and weights[3] > 0.5


def test_summaries_are_mean_and_std_over_seeds():
    runs = [{"accuracy": 0.5}, {"accuracy": 0.7}, {"accuracy": 0.6}]
    s = summarize(runs, ["accuracy"])
    assert s["accuracy_mean"] == pytest.approx(0.6) and s["accuracy_std"] == pytest.approx(0.1) and s["n"] == 3


def test_the_tfidf_floor_of_a_pair_task_sees_whether_the_two_sides_agree():
    """The target is how many words the two sides share: two texts joined into one bag cannot tell, the pair
    features (difference, product, cosine of the sides) can."""
    import random

    from pipeline.finetune.sentence import classical
    from pipeline.finetune.tasks.base import Example, TaskData

    rng = random.Random(0)
    words = [f"w{i}" for i in range(300)]

    def example():
        a = rng.sample(words, 8)
        shared = rng.randint(0, 8)
        b = a[:shared] + rng.sample([w for w in words if w not in a], 8 - shared)
        return Example(" ".join(a), " ".join(rng.sample(b, 8)), shared / 8)

    task = TaskData("agree", [], [example() for _ in range(1500)], [example() for _ in range(300)],
                    metrics=["pearson"], regression=True, test=[example() for _ in range(300)])
    assert classical(task, ngrams=2, c=1.0)("test")["pearson"] > 0.8


class _Squares:
    """A regression objective for the clipping test: a large loss, so every gradient needs clipping."""
    headline = "loss"

    def loss(self, outputs, batch):
        return 1e3 * ((outputs - batch["y"]) ** 2).mean()

    def batch_size(self, batch):
        return len(batch["y"])

    def collect(self, outputs, batch):
        pass

    def scores(self):
        return {}


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_gradients_are_clipped_for_the_fused_optimiser_in_fp32_and_bf16(precision):
    """bf16-mixed has no gradient scaler, so a fused AdamW's gradients are clipped as in fp32 (Lightning's
    mixed-precision plugin refuses to clip for any optimiser that unscales inside its step)."""
    torch.manual_seed(0)
    optim = {"name": "adamw", "lr": 1e-3, "weight_decay": 0.0, "warmup_ratio": 0.0, "betas": [0.9, 0.999], "eps": 1e-8,
             "schedule": "linear", "decay_ratio": 1.0}
    module = Finetuning(torch.nn.Linear(8, 1), _Squares(), optim, total_steps=3, fused_optimizer=True, inputs=("x",))
    norms = []

    def record(opt, args, kwargs):  # the gradients the optimiser steps with, after clipping
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))))

    class Record(L.Callback):
        def on_train_start(self, trainer, pl_module):
            trainer.optimizers[0].register_step_post_hook(record)

    batches = [{"x": torch.randn(4, 8), "y": 10 * torch.randn(4, 1)} for _ in range(3)]
    trainer = L.Trainer(max_steps=3, accelerator="cpu", precision=precision, gradient_clip_val=0.01, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[Record()])
    trainer.fit(module, torch.utils.data.DataLoader(batches, batch_size=None))
    assert len(norms) == 3 and max(norms) == pytest.approx(0.01, rel=1e-3)


class _Recorder:
    """A logger that keeps what it is given."""

    def __init__(self):
        self.logged = []

    def log_metrics(self, metrics, step):
        self.logged.append((step, metrics))


@pytest.mark.parametrize("examples, feature_set", [(640, "concat_last_four"),  # whole batches: the sampler never
                                                   (650, "weighted")])         # runs out; a last part batch: it does
def test_a_head_on_frozen_features_trains_bit_for_bit_as_the_trainer_would(examples, feature_set):
    """``fit_head`` skips the Trainer's per-step machinery, not a step of its arithmetic: the same batches in the
    same order epoch after epoch, dropout, clipping, AdamW and the schedule give the same weights to the bit."""
    from types import SimpleNamespace

    from pipeline.finetune.sentence import SentenceObjective
    from pipeline.finetune.training import fit_head, seed_everything

    generator = torch.Generator().manual_seed(0)
    states = torch.randn(examples, 3, 8, generator=generator)
    labels = (states[:, -1, 0] > 0).long()
    task = SimpleNamespace(metrics=["accuracy"], regression=False, num_outputs=2)
    optim = {"name": "adamw", "lr": 3e-3, "weight_decay": 0.01, "warmup_ratio": 0.3, "betas": [0.9, 0.999],
             "eps": 1e-6, "schedule": "linear", "decay_ratio": 1.0}
    recipe = SimpleNamespace(accelerator="cpu", precision="32-true", gradient_clip_val=1.0)

    def trained(with_trainer: bool):
        seed_everything(0)
        head = FeatureHead(feature_set, 3, 8, 2).train()
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(states, labels), batch_size=32, shuffle=True,
            generator=torch.Generator().manual_seed(0),
            collate_fn=lambda items: {"states": torch.stack([s for s, _ in items]),
                                      "label": torch.stack([y for _, y in items])})
        module = Finetuning(head, SentenceObjective(task), optim, 3 * len(loader), True, inputs=("states",))
        log = _Recorder()
        if with_trainer:
            L.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False, deterministic=True,
                      enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0,
                      enable_progress_bar=False, gradient_clip_val=1.0).fit(module, loader)
        else:
            fit_head(module, loader, 3, recipe, log)
        return torch.cat([p.detach().flatten() for p in head.parameters()]), log.logged

    (by_trainer, _), (by_hand, logged) = trained(True), trained(False)
    assert torch.equal(by_trainer, by_hand)
    assert [step for step, _ in logged] == [49]  # 3 epochs of 20 or 21 batches: one loss every 50 steps
