from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
# The BERT size the model tests use: every part present, milliseconds per step.
TINY_BERT = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=64)


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test when it is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


def run_stage(stage: str, *overrides: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run ``python -m stages.<stage>`` with Hydra overrides, as a person would."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run([sys.executable, "-m", f"stages.{stage}", *overrides], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def vocab_txt_pair(vocab_txt: Path, folder: Path, lowercase: bool):
    """(ours, the original) built from a vocab.txt-only BERT folder: ``load_tokenizer`` and ``BertTokenizerLegacy``."""
    import json

    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    from pipeline.data.tokenizer import load_tokenizer

    folder.mkdir()
    (folder / "vocab.txt").write_bytes(vocab_txt.read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lowercase}), encoding="utf-8")
    return load_tokenizer(folder), BertTokenizerLegacy(vocab_file=str(folder / "vocab.txt"), do_lower_case=lowercase)


def original_ids(slow, line: str) -> list[int]:
    return slow.convert_tokens_to_ids(slow.tokenize(line))


def tiny_export(root: Path) -> Path:
    """A 1-layer BERT export with a 500-piece Bible vocabulary in ``root/pretrain``, as the pretrain stage writes it."""
    from pipeline.data.corpus import bible_documents
    from pipeline.io import write_json
    from pipeline.model.bert import BertForPreTraining
    from pipeline.model.config import BertConfig
    from pipeline.model.hf import save_hf
    from pipeline.data.wordpiece import train_wordpiece

    docs = list(bible_documents())[:200]
    train_wordpiece((s for d in docs for s in d.sentences), root / "tokenizer", vocab_size=500, progress=False)
    model = BertForPreTraining(BertConfig(vocab_size=500, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=64, max_position_embeddings=128))
    save_hf(model, root / "pretrain" / "hf", tokenizer_dir=root / "tokenizer")
    write_json(root / "pretrain" / "run.json", {"mlflow_run_id": "none"})
    return root / "pretrain"


@pytest.fixture(scope="session")
def wikitext(tmp_path_factory):
    """WikiText-2 ``valid`` (~250k word pieces of real text) as our pipeline sees it.

    Articles split into sentences, a WordPiece vocabulary of 8,000 trained on
    them, and the text encoded; skipped when ../shared/data is absent.
    """
    from types import SimpleNamespace

    from pipeline.data.corpus import clean, wikitext_documents, write_documents
    from pipeline.data.encoded import encode_corpus
    from pipeline.data.tokenizer import load_tokenizer, special_ids, vocab_list
    from pipeline.data.wordpiece import train_wordpiece

    src = shared_data("wikitext-2", "valid.txt")
    root = tmp_path_factory.mktemp("wikitext")
    docs = [clean(d) for d in wikitext_documents(str(src))]
    with open(root / "valid.txt", "w", encoding="utf-8") as f:
        write_documents(docs, f)
    train_wordpiece((s for d in docs for s in d.sentences), root / "tok", vocab_size=8000, progress=False)
    tok = load_tokenizer(root / "tok")
    corpus = encode_corpus(tok, root / "valid.txt", root / "encoded", progress=False)
    assert corpus.meta["n_tokens"] >= 100_000
    return SimpleNamespace(root=root, text=root / "valid.txt", tok=tok, ids=special_ids(tok), corpus=corpus,
                           vocab=vocab_list(tok))
