"""One owner for every choice: the architecture registry and the fine-tuning runners behind one interface."""
from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import torch

from conftest import ROOT
from pipeline.config import compose, validate
from pipeline.errors import ConfigError, DataError
from pipeline.model_config import (LM_KINDS, LM_OBJECTIVES, METRIC_PREFIX, BertConfig, ElmoConfig, StaticConfig,
                                   build_config, config_classes, metric_prefix)
from pipeline.model.downstream import Encoder
from pipeline.architectures import ARCHITECTURES, architecture, architecture_of

# A tiny config of each architecture (vocab_size from the tokenizer below).
TINY = {"bert": lambda v: BertConfig(vocab_size=v, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=32),
        "word2vec": lambda v: StaticConfig(vocab_size=v, embedding_size=8, window=2),
        "elmo": lambda v: ElmoConfig(vocab_size=v, embedding_size=8, lstm_size=8)}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from pipeline.data.corpus import bible_documents
    from pipeline.data.wordpiece import train_wordpiece

    folder = tmp_path_factory.mktemp("tok")
    docs = list(bible_documents())[:50]
    train_wordpiece((s for d in docs for s in d.sentences), folder, vocab_size=200, progress=False)
    return folder


def _vocab_size(tokenizer_dir) -> int:
    return sum(1 for _ in open(tokenizer_dir / "vocab.txt", encoding="utf-8"))


def test_every_architecture_has_one_registry_line_and_its_objectives():
    assert list(ARCHITECTURES) == list(config_classes()) == list(TINY)
    for name, arch in ARCHITECTURES.items():
        assert architecture(name) is arch and arch.config.architecture == name
        for lm, prefix in arch.config.objectives.items():
            config = build_config({"architecture": name}, 100, lm)
            assert type(config) is arch.config and config.objective == lm and config.metric_prefix == prefix
            assert metric_prefix(lm) == prefix
    assert LM_OBJECTIVES == ("masked", "left_to_right", "cbow", "skipgram", "bilm")
    with pytest.raises(ConfigError, match=r"^model.architecture='gpt' is not allowed: expected one of bert, "
                                          r"word2vec, elmo$"):
        architecture("gpt")


def test_model_architecture_decides_and_the_objective_must_be_one_it_trains():
    with pytest.raises(ConfigError, match=r"^objective.lm=bilm is not allowed with model.architecture=word2vec: "
                                          r"expected one of cbow, skipgram \(bilm is trained by "
                                          r"model.architecture=elmo\)$"):
        build_config({"architecture": "word2vec"}, 100, "bilm")
    assert validate(compose(["model=elmo", "objective=elmo"])).model.architecture == "elmo"


@pytest.mark.parametrize("name", list(TINY))
def test_an_export_reads_back_as_every_network_downstream_uses(tokenizer_dir, tmp_path, name):
    arch = ARCHITECTURES[name]
    torch.manual_seed(0)
    config = TINY[name](_vocab_size(tokenizer_dir))
    network = arch.network(config)
    arch.save(network, tmp_path / "hf", tokenizer_dir)
    assert architecture_of(tmp_path / "hf") is arch
    assert arch.read_config(tmp_path / "hf") == config
    loaded = arch.load(tmp_path / "hf")
    assert type(loaded) is arch.network and not loaded.training
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in network.state_dict().items())
    assert (tmp_path / "hf" / "vectors.txt").is_file() == (name == "word2vec")

    ids = torch.randint(5, config.vocab_size, (3, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    types = torch.zeros_like(ids)
    encoder = Encoder(arch.encoder(tmp_path / "hf"))
    states = encoder(ids, types, mask)
    assert len(states) == encoder.n_states == config.num_hidden_layers + 1
    assert all(s.shape == (3, 7, encoder.hidden_size) for s in states)
    shapes = {"sentence": (3, 5), "ner": (3, 7, 5), "span": (3, 7, 2)}
    for kind, shape in shapes.items():
        for pretrained in (True, False):
            model = arch.task_model(kind, tmp_path / "hf", shape[-1], pretrained).eval()
            assert model(ids, types, mask).shape == shape, (kind, pretrained)


def test_a_folder_of_an_unknown_kind_is_named():
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "config.json").write_text(json.dumps({"model_type": "lab-gpt"}))
        with pytest.raises(DataError, match="model_type='lab-gpt': expected one of bert, roberta-prelayernorm, lab-word2vec, lab-elmo"):
            architecture_of(d)


def test_a_pretraining_module_is_built_by_its_architecture_with_its_metric_names():
    from pipeline.data.masking import MaskingConfig
    from pipeline.pretrain.module import PretrainSetup

    setup = PretrainSetup(optim={}, max_steps=1, seed=0, fused_optimizer=False, eval_set=None,
                          special={"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}, vocab=[], pairs=ROOT,
                          masking=MaskingConfig(), nsp=True)
    for name in ("bert", "elmo"):  # word2vec counts its noise in the examples
        arch = ARCHITECTURES[name]
        module = arch.pretraining.from_setup(TINY[name](50), setup)
        assert isinstance(module.model, arch.network) and module.lm == module.model.config.metric_prefix


# -------------------------------------------------------------------------- no dispatch outside the registry

def _sources(*globs):
    return [p for g in globs for p in sorted(ROOT.glob(g))]


def test_no_module_dispatches_on_an_architecture_s_name_or_class():
    """The names and classes of the architectures appear in comparisons, ``isinstance`` checks and dict keys only
    in their own modules and the registry: every other module of every package asks the registry."""
    names = {*ARCHITECTURES, *(a.model_type for a in ARCHITECTURES.values())}
    parts = [c for a in ARCHITECTURES.values() for c in (a.config, a.network, a.pretraining)]
    classes = {c.__name__ for c in parts}
    own = {Path(inspect.getfile(c)) for c in parts} | {ROOT / "pipeline" / "architectures.py"}
    scanned = [p for p in _sources("pipeline/**/*.py") if p not in own]
    assert len(scanned) > 60 and {p.parent.name for p in scanned} >= {
        "pipeline", "data", "model", "pretrain", "finetune", "tasks", "report", "zero_shot", "stages"}
    for path in scanned:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                consts = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)]
                assert not names & set(consts), (path.name, ast.unparse(node))
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                assert not names & keys, (path.name, ast.unparse(node))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                used = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                assert not classes & used, (path.name, ast.unparse(node))



def test_the_report_names_each_kind_of_lm_as_its_config_class_does():
    """Every metric prefix an architecture trains has its names (``LMKind``) in its config class; the report keeps
    no table of its own keyed by them."""
    assert set(LM_KINDS) == set(METRIC_PREFIX.values())
    for path in _sources("pipeline/report/*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                assert not set(LM_KINDS) & keys, (path.name, ast.unparse(node))


# -------------------------------------------------------------------------- fine-tuning runners

def test_each_kind_of_task_has_one_runner_behind_one_interface():
    from pipeline.stages.finetune import RUNNERS
    from pipeline.finetune.tasks import NerTask, SquadTask, TaskData
    from pipeline.finetune.training import Runner

    kinds = {TaskData("t", ["a"], [], []).kind, *(f.default for t in (NerTask, SquadTask)
                                                 for f in dataclasses.fields(t) if f.name == "kind")}
    assert set(RUNNERS) == kinds == {"sentence", "ner", "span"}
    assert all(issubclass(r, Runner) and r.kind == k for k, r in RUNNERS.items())
    for r in RUNNERS.values():  # the shared steps are the base's: no runner seeds or trains on its own
        assert "fine_tune" not in vars(r) and "frozen" not in vars(r) and "fit" not in vars(r)


def test_the_finetune_stage_s_outputs_have_one_writer():
    """Only the stage (``pipeline/stages/finetune.py``) writes files; runners hand theirs over (``Runner.outputs``)."""
    writers = set()
    for path in _sources("pipeline/finetune/*.py"):
        text = path.read_text(encoding="utf-8")
        if any(w in text for w in ("write_json(", "atomic_file(", "atomic_dir(", ".write_text(", "open(")):
            writers.add(path.name)
    assert writers == set()


def test_frozen_features_draw_nothing_from_the_seeded_generator(tmp_path):
    """A sentence task's pooled states are computed once, at the first frozen run: the head of that run starts
    as it would if they had been computed before it."""
    from conftest import tiny_export
    from pipeline.data.tokenizer import load_tokenizer
    from pipeline.architectures import open_export
    from pipeline.finetune.sentence import SentenceRunner
    from pipeline.finetune.tasks import Example, TaskData
    from test_squad import recipe

    export = tiny_export(tmp_path) / "hf"
    examples = [Example(f"in the beginning {i}", None, i % 2) for i in range(12)]
    task = TaskData("t", ["a", "b"], examples, examples, test=examples[:4])
    runner = SentenceRunner(recipe(), task, load_tokenizer(export), open_export(export))
    torch.manual_seed(7)
    before = torch.get_rng_state()
    runner.states()
    assert torch.equal(torch.get_rng_state(), before)


def test_a_classifier_s_test_outcomes_are_each_example_s_in_the_split_s_order(tmp_path):
    """A fine-tuned network scores test batches shortest first, a head on frozen features in the split's order:
    both record ``outcomes`` in the split's own order, each "1" where that example's prediction (scored alone) is
    its label, so runs of any two modes can be compared example by example."""
    from conftest import tiny_export
    from pipeline.data.tokenizer import load_tokenizer
    from pipeline.architectures import open_export
    from pipeline.finetune.sentence import SentenceRunner
    from pipeline.finetune.tasks import Example, TaskData
    from test_squad import recipe

    export = tiny_export(tmp_path) / "hf"
    examples = [Example(" ".join(["in the beginning"] * (1 + (5 * i) % 7)), None, (i // 2) % 2) for i in range(16)]
    task = TaskData("t", ["a", "b"], examples, examples, test=examples[::-1])
    runner = SentenceRunner(recipe(), task, load_tokenizer(export), open_export(export))
    assert runner.eval_order("test") != list(range(16))  # the fine-tuned network's batches do reorder
    for mode in ("pretrained", "frozen_last"):
        run = runner.train(mode, {"lr": 1e-3, "pooling": "mean"}, 0, None)
        scores = runner.score(run, "test")
        outcomes = scores["outcomes"]
        assert len(outcomes) == 16 and set(outcomes) <= {"0", "1"}
        assert outcomes.count("1") / 16 == pytest.approx(scores["accuracy"], abs=1e-6)
        net = run.module.eval()
        checked = 0
        with torch.no_grad():
            for i, e in enumerate(task.test):
                batch = {"states": runner.states()["test"]["mean"][i:i + 1]} if mode == "frozen_last" else \
                    runner.collate([runner.encoded["test"][i]])
                logits = net.outputs(batch)[0]
                if abs(float(logits[0] - logits[1])) > 1e-4:  # a near tie could flip with the batch's padding
                    checked += 1
                    assert outcomes[i] == ("1" if int(logits.argmax()) == e.label else "0"), (mode, i)
        assert checked >= 8


def test_the_pretrain_stage_depends_on_every_architecture_s_pretraining_module():
    """The registry imports a LightningModule only when a stage asks for it; the pretrain and pilot stages train
    every architecture, so each module is among their DVC deps (which ``tests/test_stages.py`` holds to what they
    import): an edit to one reruns its pretraining."""
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    modules = {a.pretraining_at.split(":")[0].replace(".", "/") + ".py" for a in ARCHITECTURES.values()}
    assert len(modules) == 2  # pipeline/pretrain/module.py (BERT) and lineage.py (word2vec, ELMo)
    for stage in ("pretrain", "pilot"):
        assert modules <= set(stages[stage]["do"]["deps"]), stage
