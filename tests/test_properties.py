"""Property-based: any text through prepare -> tokenize -> pairs -> masking keeps the invariants."""
from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.data.corpus import bible_documents, prepare_corpus, text_documents
from pipeline.data.datamodule import pad_collate
from pipeline.errors import DataError
from pipeline.data.masking import MaskingConfig, mask_tokens
from pipeline.data.pairs import make_examples
from pipeline.data.shards import PairsDataset
from pipeline.data.tokenizer import load_tokenizer, special_ids
from pipeline.data.wordpiece import train_wordpiece
from pipeline.names import IGNORE_INDEX
from pipeline.settings import PairsSettings

MAX_LEN = 32
_TOK = {}


def tokenizer(root: Path):
    if "tok" not in _TOK:
        docs = list(itertools.islice(bible_documents(), 0, 1189, 11))
        train_wordpiece([s for d in docs for s in d.sentences] + ["Ünïcödé 中文 ﬁ ½ 🤗"], root / "tok",
                        vocab_size=600, progress=False)
        _TOK["tok"] = load_tokenizer(root / "tok")
    return _TOK["tok"]


# Any Unicode except lone surrogates (not encodable as UTF-8, so no file can hold them), NUL (a file with
# one is refused as binary; tested elsewhere) and line breaks (they end a sentence in the input format).
NOT_IN_A_SENTENCE = "\x00\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
word = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=NOT_IN_A_SENTENCE),
               min_size=1, max_size=300)
sentence = st.lists(word, min_size=1, max_size=12).map(" ".join)
document = st.lists(sentence, min_size=1, max_size=8)
corpus = st.lists(document, min_size=3, max_size=6)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(docs=corpus, fmt=st.sampled_from(["nsp_pairs", "doc_sentences", "full_sentences"]), seed=st.integers(0, 99))
def test_pipeline_invariants_on_arbitrary_text(docs, fmt, seed):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        tok = tokenizer(Path(tempfile.gettempdir()) / "bert-lab-properties")
        ids = special_ids(tok)
        src = root / "in.txt"
        src.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n", encoding="utf-8")
        try:
            prepare_corpus(text_documents([str(src)]), root / "corpus", valid_fraction=0.01, seed=seed, progress=False)
        except DataError as e:  # only the corpus's own clear refusals (e.g. every document one sentence long)
            assert str(e).startswith("corpus 'corpus'"), e
            return
        train = root / "corpus" / "train.txt"
        try:
            pairs = PairsSettings(format=fmt, max_seq_length=MAX_LEN, short_seq_prob=0.2, dupe_factor=2,
                                  shard_tokens=50)
            make_examples(tok, train, root / "pairs", pairs,
                          seed=seed, cls_id=ids["cls"], sep_id=ids["sep"], num_workers=1, progress=False)
        except DataError as e:  # a clear refusal naming the file (e.g. every document tokenizes to nothing)
            assert str(e).startswith(f"{train}: "), e
            assert not (root / "pairs").exists()
            return
        ds = PairsDataset(root / "pairs")
        V = tok.get_vocab_size()
        items = [ds[i] for i in range(len(ds))]
        for ex in items:
            x, types = ex["input_ids"], ex["token_type_ids"]
            assert 3 <= len(x) <= MAX_LEN and ((x >= 0) & (x < V)).all()
            assert x[0] == ids["cls"] and x[-1] == ids["sep"] and ids["pad"] not in x and ids["mask"] not in x
            if fmt == "nsp_pairs":  # [CLS] A [SEP] B [SEP]: exactly two [SEP], segment B after the first
                seps = [i for i, t in enumerate(x) if t == ids["sep"]]
                assert len(seps) == 2 and 1 < seps[0] + 1 < len(x) - 1
                assert (types[: seps[0] + 1] == 0).all() and (types[seps[0] + 1:] == 1).all()
                assert ex["next_sentence_label"] in (0, 1)
            else:  # packed: one segment, no NSP label
                assert (types == 0).all() and ex["next_sentence_label"] == IGNORE_INDEX
        if not items:
            return
        batch = pad_collate(items[:16])
        inp = batch["input_ids"]
        special = (batch["attention_mask"] == 0) | (inp == ids["cls"]) | (inp == ids["sep"])
        cfg = MaskingConfig(mlm_probability=0.3, max_predictions_per_seq=None)
        corrupted, labels = mask_tokens(inp, special, cfg, mask_id=ids["mask"], vocab_size=V,
                                        generator=torch.Generator().manual_seed(seed))
        chosen = labels != IGNORE_INDEX
        assert not (chosen & special).any()                      # never a special token or padding
        assert torch.equal(labels[chosen], inp[chosen])          # labels are the original ids, only where chosen
        assert torch.equal(corrupted[~chosen], inp[~chosen])     # nothing else changes
        assert ((corrupted >= 0) & (corrupted < V)).all()
        lengths = batch["attention_mask"].sum(1)
        n = chosen.sum(1)
        candidates = (~special).sum(1)
        expected = torch.minimum(torch.clamp(torch.round(lengths * 0.3).long(), min=1), candidates)
        assert torch.equal(n, expected)
