"""Speed and memory of the make_pairs stage, side by side with an in-memory reference.

    python benchmarks/make_pairs_bench.py --dupe-factor 10
    python benchmarks/make_pairs_bench.py --corpus my.txt --tokenizer data/tokenizer --dupe-factor 1

Runs the stage's own code (tokenize the corpus file, generate the examples,
write the shards) in a child process, then the reference (``reference_pairs``:
the original script's in-memory recipe with the pure-Python BERT tokenizer and
per-instance masking, writing nothing) in another, sampling the memory of each
process tree (summed RSS and PSS) every 20 ms. Ours masks at batch time, so the cost of masking
every example once (what static masking adds) is measured separately as
``mask_s``.

Without ``--corpus`` it uses WikiText-2 ``train`` from ../shared/data, split into
sentences and documents the way the wikitext corpus source does, with a
30,522-piece WordPiece vocabulary trained on it (preparation is cached and not
timed). Prints a table, then as its last line one JSON object with ``wall_s``,
``peak_rss_mb``, ``examples``, ``tokens`` and the reference's figures and ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "train.txt"


# --------------------------------------------------------------------------- #
# Memory of a process tree
# --------------------------------------------------------------------------- #
def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def _memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, PSS) of one process; PSS gives each page shared with other processes only its share."""
    rss = pss = 0.0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) / 1024
    except OSError:
        pass
    return rss, pss


def tree_memory_mb(pid: int) -> tuple[float, float]:
    """Summed (RSS, PSS) of a process and all its descendants.

    The RSS sum counts pages the workers share with their parent once per
    process, an upper bound; the PSS sum counts them once in all.
    """
    rss = pss = 0.0
    stack = [pid]
    while stack:
        p = stack.pop()
        r, q = _memory_mb(p)
        rss, pss = rss + r, pss + q
        stack += _children(p)
    return rss, pss


def run_child(args: list[str]) -> tuple[dict, float, list[float]]:
    """Run this script in child mode; returns its JSON result, wall seconds and sampled peak (RSS, PSS) sums."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    peak = [0.0, 0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[:] = map(max, peak, tree_memory_mb(proc.pid))
            time.sleep(0.05)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, _ = proc.communicate()
    done.set()
    t.join()
    if proc.returncode:
        raise SystemExit(f"child {args[:2]} failed with status {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1]), time.perf_counter() - started, peak


# --------------------------------------------------------------------------- #
# Children
# --------------------------------------------------------------------------- #
def child_ours(a: argparse.Namespace) -> dict:
    import resource

    from pipeline.data.pairs import make_examples
    from pipeline.data.tokenizer import load_tokenizer, special_ids
    from pipeline.settings import PairsSettings

    t0 = time.perf_counter()
    tok = load_tokenizer(a.tokenizer)
    ids = special_ids(tok)
    info: dict = {}
    pairs = PairsSettings(format="nsp_pairs", max_seq_length=a.max_seq_length, short_seq_prob=0.1,
                          dupe_factor=a.dupe_factor, shard_tokens=a.shard_tokens)
    stats = make_examples(tok, a.corpus, Path(a.out), pairs, seed=12345, cls_id=ids["cls"], sep_id=ids["sep"],
                          num_workers=a.workers, progress=not a.quiet, run_info=info)
    return {"wall_s": time.perf_counter() - t0, "examples": stats["n_examples"], "tokens": stats["n_tokens"],
            "main_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "worker_peak_rss_mb": list(info["worker_peak_rss_mb"].values()),
            "fraction_random_next": stats["fraction_random_next"]}


def child_mask(a: argparse.Namespace) -> dict:
    from pipeline.data.tokenizer import load_tokenizer, special_ids

    tok = load_tokenizer(a.tokenizer)
    return {"mask_s": mask_everything(Path(a.out), special_ids(tok), tok.get_vocab_size())}


def mask_everything(path: Path, ids: dict, vocab_size: int, batch: int = 256) -> float:
    """Seconds to mask every stored example once (what static masking would add), in batches."""
    import torch

    from pipeline.data.datamodule import pad_collate
    from pipeline.data.masking import MaskingConfig, mask_tokens
    from pipeline.data.shards import PairsDataset

    ds = PairsDataset(path)
    cfg = MaskingConfig()
    g = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    for start in range(0, len(ds), batch):
        b = pad_collate([ds[i] for i in range(start, min(len(ds), start + batch))])
        x = b["input_ids"]
        special = (b["attention_mask"] == 0) | (x == ids["cls"]) | (x == ids["sep"])
        mask_tokens(x, special, cfg, mask_id=ids["mask"], vocab_size=vocab_size, generator=g)
    return time.perf_counter() - t0


def child_reference(a: argparse.Namespace) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import reference_pairs

    t0 = time.perf_counter()
    r = reference_pairs.run(Path(a.corpus), Path(a.tokenizer) / "vocab.txt", max_seq_length=a.max_seq_length,
                            short_seq_prob=0.1, dupe_factor=a.dupe_factor, tokenizer=a.reference)
    return {"wall_s": time.perf_counter() - t0, **r}


# --------------------------------------------------------------------------- #
# Input preparation (cached, not timed)
# --------------------------------------------------------------------------- #
def prepare_wikitext(cache: Path) -> tuple[Path, Path]:
    corpus, tok_dir = cache / "wikitext2_train.txt", cache / "tokenizer30k"
    if not corpus.exists():
        if not WIKITEXT.exists():
            raise SystemExit(f"{WIKITEXT} not found: give --corpus and --tokenizer")
        from pipeline.data.corpus import clean, wikitext_documents, write_documents

        print(f"preparing {corpus} from {WIKITEXT} (once)", file=sys.stderr)
        cache.mkdir(parents=True, exist_ok=True)
        docs = [clean(d) for d in wikitext_documents(str(WIKITEXT))]
        with open(f"{corpus}.tmp", "w", encoding="utf-8") as f:
            write_documents(docs, f)
        os.replace(f"{corpus}.tmp", corpus)
    if not (tok_dir / "tokenizer.json").exists():
        from pipeline.data.corpus import read_documents
        from pipeline.data.wordpiece import train_wordpiece

        print(f"training a 30,522-piece vocabulary on {corpus} (once)", file=sys.stderr)
        train_wordpiece((s for d in read_documents(corpus) for s in d), tok_dir, vocab_size=30522, progress=False)
    return corpus, tok_dir


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", help="corpus file: one sentence per line, blank line between documents")
    p.add_argument("--tokenizer", help="tokenizer folder written by train_wordpiece (tokenizer.json, vocab.txt)")
    p.add_argument("--dupe-factor", type=int, default=10)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--shard-tokens", type=int, default=250_000)
    p.add_argument("--reference", choices=["python", "fast", "none"], default="python",
                   help="reference tokenizer: the pure-Python BERT tokenizer (as the original), the fast one, or skip")
    p.add_argument("--no-mask", dest="mask", action="store_false", help="skip timing the masking of every example")
    p.add_argument("--cache", default=str(ROOT / ".bench-cache"), help="where the prepared WikiText input is kept")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--child", choices=["ours", "mask", "reference"], help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args()

    if a.child:
        result = {"ours": child_ours, "mask": child_mask, "reference": child_reference}[a.child](a)
        print(json.dumps(result))
        return
    if not a.corpus:
        a.corpus, a.tokenizer = prepare_wikitext(Path(a.cache))
    elif not a.tokenizer:
        raise SystemExit("--tokenizer is needed with --corpus")
    common = ["--corpus", str(a.corpus), "--tokenizer", str(a.tokenizer), "--dupe-factor", str(a.dupe_factor),
              "--max-seq-length", str(a.max_seq_length), "--workers", str(a.workers),
              "--shard-tokens", str(a.shard_tokens), "--reference", a.reference]
    with tempfile.TemporaryDirectory() as tmp:
        out = ["--out", str(Path(tmp) / "pairs")]
        ours, ours_process_s, ours_peak = run_child(["--child", "ours", *common, *out,
                                                     *(["--quiet"] if a.quiet else [])])
        mask_s = run_child(["--child", "mask", *common, *out])[0]["mask_s"] if a.mask else None
    result = {"wall_s": round(ours["wall_s"], 3), "peak_rss_mb": round(ours_peak[0], 1),
              "peak_pss_mb": round(ours_peak[1], 1), "examples": ours["examples"],
              "tokens": ours["tokens"], "process_s": round(ours_process_s, 3),
              "mask_s": round(mask_s, 3) if mask_s is not None else None,
              "workers": a.workers, "dupe_factor": a.dupe_factor, "max_seq_length": a.max_seq_length}
    print(f"ours:      {ours['wall_s']:8.2f} s  peak {ours_peak[0]:7.1f} MB RSS, {ours_peak[1]:.1f} MB PSS (all processes)  "
          f"{ours['examples']:,} examples, {ours['tokens']:,} tokens; masking every example once: "
          f"{mask_s or 0:.2f} s", file=sys.stderr)
    if a.reference != "none":
        ref, ref_process_s, ref_peak = run_child(["--child", "reference", *common])
        result.update(ref_wall_s=round(ref["wall_s"], 3), ref_peak_rss_mb=round(ref_peak[0], 1),
                      ref_examples=ref["examples"], ref_tokenizer=a.reference,
                      speedup=round(ref["wall_s"] / ours["wall_s"], 2),
                      speedup_with_masking=round(ref["wall_s"] / (ours["wall_s"] + (mask_s or 0)), 2),
                      memory_ratio=round(ours_peak[0] / ref_peak[0], 3))
        print(f"reference: {ref['wall_s']:8.2f} s  peak {ref_peak[0]:7.1f} MB RSS  {ref['examples']:,} examples "
              f"(in memory, {a.reference} tokenizer, masking included, nothing written)", file=sys.stderr)
        print(f"ratio:     {result['speedup']:.1f}x faster ({result['speedup_with_masking']:.1f}x counting masking), "
              f"{result['memory_ratio']:.2f}x the memory", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
