"""The eval_set stage: the held-out split (as make_pairs encoded it) -> ``paths.eval_set``: the fixed set, the layout
probe, and in ``meta.json`` what they hold and the count-based floors scored on both (counted on the baseline's
train examples)."""
from __future__ import annotations

import tempfile
from pathlib import Path

from pipeline.data.encoded import EncodedCorpus
from pipeline.data.eval_set import EvalSetConfig, build, held_out, score_floors, score_probe_floors, write
from pipeline.data.layout import build as build_probe
from pipeline.data.ngram import NgramTables
from pipeline.data.shards import PairsDataset
from pipeline.data.tokenizer import load_tokenizer, special_ids
from pipeline.settings import Lab


def run(lab: Lab) -> dict:
    config, layout = EvalSetConfig.of(lab.eval_set, lab.run.seed), lab.eval_set.layout
    tok = load_tokenizer(lab.paths.tokenizer)
    ids = special_ids(tok)
    pairs = Path(lab.paths.pairs)
    corpus = EncodedCorpus(pairs / "valid" / "corpus")
    with tempfile.TemporaryDirectory(prefix="bert-lab-eval-set-") as tmp:
        arrays = build(held_out(corpus, config, ids["cls"], ids["sep"], Path(tmp) / "valid"), config,
                       mask_id=ids["mask"], cls_id=ids["cls"], sep_id=ids["sep"], vocab_size=tok.get_vocab_size())
    probe = build_probe(corpus, lengths=layout.lengths, rows=layout.rows, seed=config.seed, cls_id=ids["cls"],
                        sep_id=ids["sep"], mask_id=ids["mask"], source=f"{pairs}/valid")
    tables = NgramTables.count(PairsDataset(pairs / "train"), tok.get_vocab_size(),
                               special=[ids[k] for k in ("pad", "cls", "sep", "mask")], progress=lab.runtime.progress)
    return write(lab.paths.eval_set, arrays, probe, config, {"lengths": list(layout.lengths), "rows": layout.rows},
                 score_floors(tables, arrays, ids["mask"]), score_probe_floors(tables, probe, ids["mask"]),
                 tables.n_counted, ids["sep"])
