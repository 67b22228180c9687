"""A straightforward, in-memory port of BERT's original data recipe: the reference for the benchmark.

Written the way ``create_pretraining_data.py`` works: every document held in
memory as Python lists, tokenized sentence by sentence with the pure-Python
BERT tokenizer, instances built one token at a time, shuffled globally, then
masked one instance at a time (static masking). Nothing is written (the
original's measured figure had its TFRecord writing stubbed out too), so it
is a lower bound on the original's cost. Used only by ``make_pairs_bench.py``.
"""
from __future__ import annotations

import random
from pathlib import Path


def read_documents(path: Path, tokenize) -> list[list[list[str]]]:
    docs: list[list[list[str]]] = [[]]
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                docs.append([])
                continue
            tokens = tokenize(line)
            if tokens:
                docs[-1].append(tokens)
    return [d for d in docs if d]


def _truncate(tokens_a: list, tokens_b: list, max_num: int, rng: random.Random) -> None:
    while len(tokens_a) + len(tokens_b) > max_num:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def instances_from_document(docs, index, max_seq_length, short_seq_prob, rng):
    document = docs[index]
    max_num = max_seq_length - 3
    target = rng.randint(2, max_num) if rng.random() < short_seq_prob else max_num
    out, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for s in chunk[:a_end] for t in s]
            if len(chunk) == 1 or rng.random() < 0.5:
                is_random = True
                other = index
                while other == index:
                    other = rng.randint(0, len(docs) - 1)
                random_doc = docs[other]
                tokens_b = []
                for s in random_doc[rng.randint(0, len(random_doc) - 1):]:
                    tokens_b.extend(s)
                    if len(tokens_b) >= target - len(tokens_a):
                        break
                i -= len(chunk) - a_end
            else:
                is_random = False
                tokens_b = [t for s in chunk[a_end:] for t in s]
            _truncate(tokens_a, tokens_b, max_num, rng)
            tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
            segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
            out.append((tokens, segments, is_random))
            chunk, length = [], 0
        i += 1
    return out


def mask_instance(tokens, vocab_words, rng, masked_lm_prob=0.15, max_predictions=20):
    candidates = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    rng.shuffle(candidates)
    n = min(max_predictions, max(1, int(round(len(tokens) * masked_lm_prob))))
    output = list(tokens)
    labels = []
    for i in sorted(candidates[:n]):
        r = rng.random()
        output[i] = "[MASK]" if r < 0.8 else (tokens[i] if r < 0.9 else vocab_words[rng.randint(0, len(vocab_words) - 1)])
        labels.append((i, tokens[i]))
    return output, labels


def run(corpus: Path, vocab_file: Path, *, max_seq_length: int, short_seq_prob: float, dupe_factor: int,
        seed: int = 12345, tokenizer: str = "python") -> dict:
    vocab_words = Path(vocab_file).read_text(encoding="utf-8").split("\n")[:-1]
    if tokenizer == "python":
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

        tokenize = BertTokenizerLegacy(str(vocab_file), do_lower_case=True).tokenize
    else:
        from tokenizers import Tokenizer

        fast = Tokenizer.from_file(str(Path(vocab_file).parent / "tokenizer.json"))
        tokenize = lambda s: fast.encode(s, add_special_tokens=False).tokens  # noqa: E731
    docs = read_documents(corpus, tokenize)
    rng = random.Random(seed)
    rng.shuffle(docs)
    instances = []
    for _ in range(dupe_factor):
        for index in range(len(docs)):
            instances.extend(instances_from_document(docs, index, max_seq_length, short_seq_prob, rng))
    rng.shuffle(instances)
    n_tokens = 0
    for tokens, _, _ in instances:
        mask_instance(tokens, vocab_words, rng)
        n_tokens += len(tokens)
    return {"examples": len(instances), "tokens": n_tokens}
