"""Our BERT on its own: config checks, attention masking, weight tying, training, HF folders."""
import json
import logging
import re

import pytest
import torch

import torch.nn.functional as F

from pipeline.model.bert import BertForPreTraining, BertForSequenceClassification, BertModel, pretraining_loss
from pipeline.model_config import BertConfig
from pipeline.model.hf import load_hf, save_hf
from pipeline.model.lm_loss import linear_cross_entropy
from conftest import TINY_BERT as TINY



def tiny(**overrides):
    return BertConfig(**{**TINY, **overrides})


def random_ids(B=2, T=10, seed=0):
    return torch.randint(5, TINY["vocab_size"], (B, T), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------- config


@pytest.mark.parametrize("overrides, message", [
    (dict(hidden_size=130, num_attention_heads=4),
     "model.hidden_size=130 is not allowed: expected a multiple of model.num_attention_heads=4"),
    (dict(num_hidden_layers=0), "model.num_hidden_layers=0 is not allowed: expected a positive integer"),
    (dict(vocab_size=-5), "model.vocab_size=-5 is not allowed: expected a positive integer"),
    (dict(intermediate_size=64.0), "model.intermediate_size=64.0 is not allowed: expected a positive integer"),
    (dict(hidden_dropout_prob=1.0), "model.hidden_dropout_prob=1.0 is not allowed: expected a probability in [0, 1)"),
    (dict(attention_probs_dropout_prob=-0.1), "model.attention_probs_dropout_prob=-0.1 is not allowed: expected a "
                                              "probability"),
    (dict(hidden_act="swish"), "model.hidden_act='swish' is not allowed: expected one of gelu, relu"),
    (dict(pad_token_id=100), "model.pad_token_id=100 is not allowed: expected a token id in [0, model.vocab_size=100)"),
    (dict(layer_norm_eps=0), "model.layer_norm_eps=0 is not allowed: expected a positive number"),
    (dict(attention_init="sinusoidal"), "model.attention_init='sinusoidal' is not allowed: expected one of normal, "
                                        "local"),
    (dict(attention_init="local"), "model.attention_init='local' is not allowed: expected normal with heads of 8 "
                                   "dimensions (local needs heads of at least 32)"),
])
def test_config_rejects_bad_values_naming_key_and_value(overrides, message):
    with pytest.raises(ValueError) as e:
        tiny(**overrides)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_sequence_longer_than_positions_is_a_clear_error():
    model = BertModel(tiny(max_position_embeddings=8))
    with pytest.raises(ValueError, match="sequence length 10 exceeds model.max_position_embeddings=8"):
        model(random_ids(T=10))


# ------------------------------------------------------------------------- attention


def test_causal_mode_never_looks_ahead():
    torch.manual_seed(0)
    model = BertModel(tiny(causal=True)).eval()
    ids = random_ids()
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 7) % TINY["vocab_size"]
    with torch.no_grad():
        a, b = model(ids).last_hidden_state, model(changed).last_hidden_state
        mask = torch.ones_like(ids)
        mask[1, 8:] = 0
        c, d = model(ids, attention_mask=mask).last_hidden_state, model(changed, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(a[:, :6], b[:, :6], atol=1e-6, rtol=0)
    torch.testing.assert_close(c[:, :6], d[:, :6], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_bidirectional_mode_does_look_ahead():
    torch.manual_seed(0)
    model = BertModel(tiny()).eval()
    ids = random_ids()
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 7) % TINY["vocab_size"]
    with torch.no_grad():
        assert not torch.allclose(model(ids).last_hidden_state[:, 0], model(changed).last_hidden_state[:, 0])


def test_padding_does_not_change_real_tokens():
    torch.manual_seed(0)
    model = BertModel(tiny()).eval()
    ids = random_ids(B=1, T=7)
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    mask = (padded != 0).long()
    with torch.no_grad():
        short = model(ids)
        long = model(padded, attention_mask=mask)
        all_ones = model(ids, attention_mask=torch.ones_like(ids))
    torch.testing.assert_close(long.last_hidden_state[:, :7], short.last_hidden_state, atol=1e-5, rtol=0)
    torch.testing.assert_close(long.pooler_output, short.pooler_output, atol=1e-5, rtol=0)
    torch.testing.assert_close(all_ones.last_hidden_state, short.last_hidden_state, atol=0, rtol=0)


def test_dropout_is_off_in_eval_and_on_in_train():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3))
    ids = random_ids()
    with torch.no_grad():
        model.eval()
        assert torch.equal(model(ids).mlm_logits, model(ids).mlm_logits)
        model.train()
        assert not torch.equal(model(ids).mlm_logits, model(ids).mlm_logits)


# ------------------------------------------------------------------------ heads, init


def test_init_as_hugging_face():
    model = BertForPreTraining(tiny(pad_token_id=3))
    emb = model.bert.embeddings.word_embeddings.weight
    assert torch.all(emb[3] == 0) and emb[4].abs().sum() > 0
    assert 0.015 < model.bert.encoder.layer[0].intermediate.dense.weight.std() < 0.025
    assert torch.all(model.bert.encoder.layer[0].attention.self.query.bias == 0)
    assert torch.all(model.cls.predictions.bias == 0)
    assert torch.all(model.bert.embeddings.LayerNorm.weight == 1)


def local_model(**overrides) -> BertModel:
    torch.manual_seed(0)
    return BertModel(tiny(hidden_size=128, num_attention_heads=2, intermediate_size=256, max_position_embeddings=128,
                          attention_init="local", **overrides))


def first_layer_attention(model: BertModel, layer: int, T: int) -> torch.Tensor:
    """(B, heads, T, T) the attention weights of ``layer``'s heads on random pieces of length T (left to right for a
    causal model)."""
    causal = model.config.causal
    x = model.embeddings(random_ids(B=4, T=T))
    for block in model.encoder.layer[:layer]:
        x = block(x, None, causal)
    att = model.encoder.layer[layer].attention.self
    B, nh, hd = x.shape[0], att.num_heads, att.head_size
    q, k = (f(x).view(B, T, nh, hd).transpose(1, 2) for f in (att.query, att.key))
    scores = q @ k.transpose(-1, -2) / hd ** 0.5
    if causal:
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, -1)


@pytest.mark.parametrize("T", [16, 128])
def test_local_init_starts_each_first_layer_head_on_one_neighbour_at_any_length(T):
    """attention_init=local: head 0 of the first layer reads the piece before, head 1 the piece after, at every
    position and whatever the length; the second layer's heads two pieces away."""
    model = local_model()
    i = torch.arange(2, T - 2)
    for layer, deltas in enumerate(((-1, 1), (-2, 2))):
        a = first_layer_attention(model, layer, T)
        for head, delta in enumerate(deltas):
            assert a[:, head, i, i + delta].mean() > (0.6 if layer == 0 else 0.3)
    causal = local_model(causal=True)  # left to right: the pieces before, one and two back, then three and four
    for layer, deltas in enumerate(((-1, -2), (-3, -4))):
        a = first_layer_attention(causal, layer, T)
        j = torch.arange(4, T)
        for head, delta in enumerate(deltas):
            assert a[:, head, j, j + delta].mean() > 0.3
    normal = BertModel(tiny(hidden_size=128, num_attention_heads=2, intermediate_size=256, max_position_embeddings=128))
    assert first_layer_attention(normal, 0, T)[:, 0, i, i - 1].mean() < 2 / T  # BERT's init: spread over all


def test_local_init_keeps_the_rest_as_bert_s_and_loads_in_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    model = local_model()
    emb = model.embeddings
    assert torch.all(emb.word_embeddings.weight[:, -32:] == 0) and torch.all(emb.position_embeddings.weight[:, :-32] == 0)
    assert 0.015 < emb.word_embeddings.weight[5:, :-32].std() < 0.025   # the tokens' other dimensions: N(0, 0.02)
    assert 0.015 < model.encoder.layer[1].intermediate.dense.weight.std() < 0.025
    assert torch.all(model.encoder.layer[0].attention.self.value.weight.std() > 0.015)
    pre = BertForPreTraining(model.config)
    save_hf(pre.eval(), tmp_path / "export")
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["attention_init"] == "local"   # how its weights started; transformers keeps it as an attribute
    hf = transformers.BertForMaskedLM.from_pretrained(tmp_path / "export").eval()
    ids = random_ids(T=40)
    with torch.no_grad():
        assert torch.allclose(hf(ids).logits, pre(ids).mlm_logits, atol=1e-5)


def _masked_batch():
    """A tiny BERT (seed 0), two random rows, and three masked positions among them."""
    torch.manual_seed(0)
    model = BertForPreTraining(tiny()).eval()
    ids = random_ids()
    masked = torch.zeros_like(ids, dtype=torch.bool)
    masked[0, [1, 4]] = masked[1, 7] = True
    return model, ids, masked


def test_gathered_logits_and_loss_equal_full():
    model, ids, masked = _masked_batch()
    labels = torch.where(masked, ids, -100)
    with torch.no_grad():
        full, gathered = model(ids), model(ids, masked_positions=masked)
    assert gathered.mlm_logits.shape == (3, TINY["vocab_size"]) and full.mlm_logits.shape == (2, 10, 100)
    torch.testing.assert_close(gathered.mlm_logits, full.mlm_logits[masked], atol=1e-6, rtol=0)
    total, mlm, nsp = pretraining_loss(gathered, ids[masked])
    assert nsp is None and total is mlm
    torch.testing.assert_close(mlm, pretraining_loss(full, labels)[1])
    with pytest.raises(ValueError, match="gathered logits need gathered labels"):
        pretraining_loss(gathered, labels)


def _logits_then_loss(x, w, b, targets):
    return F.cross_entropy(F.linear(x, w, b).float(), targets, ignore_index=-100)


@pytest.mark.parametrize("rows", [1, 3, 7, 40, 45, None])
def test_linear_cross_entropy_equals_logits_then_cross_entropy(rows):
    """Chunk by chunk, gradient computed in the forward pass: the same loss, gradients and argmax as the
    (N, V) logits followed by cross-entropy, for every chunking, with unscored rows among the scored."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 16, generator=g, dtype=torch.float64)
    w = torch.randn(300, 16, generator=g, dtype=torch.float64) * 0.3
    b = torch.randn(300, generator=g, dtype=torch.float64) * 0.1
    targets = torch.randint(0, 300, (40,), generator=g)
    targets[[0, 5, 17, 39]] = -100
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    ref = F.cross_entropy(F.linear(*leaves), targets, ignore_index=-100)
    ref.backward()
    expected = [t.grad for t in leaves]
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    loss, predictions = linear_cross_entropy(*leaves, targets, predict=True, rows=rows)
    (3.0 * loss).backward()  # an upstream factor reaches every gradient
    torch.testing.assert_close(loss, ref, atol=1e-12, rtol=0)
    for got, want, name in zip((t.grad for t in leaves), expected, "xwb"):
        torch.testing.assert_close(got, 3.0 * want, atol=1e-12, rtol=0, msg=name)
    assert torch.equal(predictions, F.linear(x, w, b).argmax(1))
    with torch.no_grad():  # validation: no gradient work, the same number
        torch.testing.assert_close(linear_cross_entropy(x, w, b, targets, rows=rows)[0], ref.detach())


def test_linear_cross_entropy_under_bf16_autocast_and_with_no_scored_row():
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(24, 16, generator=g), torch.randn(200, 16, generator=g) * 0.3, torch.zeros(200)
    targets = torch.randint(0, 200, (24,), generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = _logits_then_loss(x, w, b, targets)  # what pretraining_loss computes under bf16-mixed
        loss, _ = linear_cross_entropy(x, w, b, targets, rows=5)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref, atol=2e-2, rtol=0)  # bf16 products, fp32 softmax, on both sides
    none = torch.full((24,), -100)
    assert torch.isnan(linear_cross_entropy(x, w, b, none)[0]) and torch.isnan(_logits_then_loss(x, w, b, none))


def test_pretraining_with_targets_gives_the_logits_loss_and_gradients():
    """The pretraining module's path (``mlm_targets``): no logits, the loss and gradients of the logits path."""
    torch.manual_seed(0)
    ids = random_ids(B=3, T=10)
    masked = torch.zeros_like(ids, dtype=torch.bool)
    masked[0, [1, 4]] = masked[1, 7] = masked[2, 2] = True
    rows = masked.flatten().nonzero().squeeze(1)
    rows = torch.cat([rows, rows[:1]])  # a padded row, as the module pads N, scored by no target
    targets = torch.cat([ids.flatten()[rows[:-1]], torch.tensor([-100])])
    nsp = torch.tensor([0, 1, 0])
    model = BertForPreTraining(tiny()).eval()  # dropout off: both paths see the same network
    grads = []
    for fused in (False, True):
        model.zero_grad(set_to_none=True)
        out = model(ids, masked_positions=rows, mlm_targets=targets if fused else None, return_predictions=fused)
        loss = pretraining_loss(out, targets, nsp)
        loss[0].backward()
        grads.append((loss, {n: p.grad.clone() for n, p in model.named_parameters()}, out))
    (ref, ref_grads, logits_out), (got, got_grads, fused_out) = grads
    assert fused_out.mlm_logits is None and logits_out.mlm_loss is None
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    for name in ref_grads:
        torch.testing.assert_close(got_grads[name], ref_grads[name], atol=1e-6, rtol=1e-5, msg=name)
    assert torch.equal(fused_out.mlm_predictions, logits_out.mlm_logits.argmax(1))
    with pytest.raises(ValueError, match="mlm_targets needs masked_positions"):
        model(ids, mlm_targets=targets)


def test_tied_weights_stay_tied():
    source, target = BertForPreTraining(tiny()), BertForPreTraining(tiny())
    target.load_state_dict(source.state_dict())
    decoder, embedding = target.cls.predictions.decoder, target.bert.embeddings.word_embeddings
    assert decoder.weight is embedding.weight and decoder.bias is target.cls.predictions.bias
    assert torch.equal(embedding.weight, source.bert.embeddings.word_embeddings.weight)
    target.load_state_dict(source.state_dict(), assign=True)  # replaces Parameter objects...
    target.tie_weights()  # ...so tie again
    assert target.cls.predictions.decoder.weight is target.bert.embeddings.word_embeddings.weight
    assert sum(p.numel() for p in target.parameters()) < sum(v.numel() for v in target.state_dict().values())


def test_training_step_decreases_loss():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny()).train()
    ids = random_ids(B=4, T=12)
    masked = torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) < 0.3
    inputs = ids.masked_fill(masked, 4)  # 4 plays [MASK]
    nsp = torch.tensor([0, 1, 0, 1])
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(5):
        loss, _, _ = pretraining_loss(model(inputs, masked_positions=masked), ids[masked], nsp)
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


def test_sequence_classification_shapes():
    model = BertForSequenceClassification(tiny(), num_labels=1).eval()
    assert model(random_ids(B=3)).shape == (3, 1)
    with pytest.raises(ValueError, match="num_labels=0"):
        BertForSequenceClassification(tiny(), num_labels=0)


# ------------------------------------------------------------------------ HF folders


@pytest.fixture
def tokenizer_dir(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    trainer = tokenizers.trainers.WordPieceTrainer(
        vocab_size=60, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(["the cat sat on the mat", "a dog ran to the park"] * 10, trainer)
    folder = tmp_path / "tok"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    (folder / "vocab.txt").write_text("".join(f"{t}\n" for t, _ in vocab))
    return folder


def test_save_load_round_trip_with_tokenizer(tmp_path, tokenizer_dir):
    torch.manual_seed(0)
    model = BertForPreTraining(tiny(causal=True)).eval()
    out = tmp_path / "export"
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run")
    save_hf(model, out, tokenizer_dir=tokenizer_dir, do_lower_case=False)
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json",
        "tokenizer_config.json", "vocab.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "bert" and config["is_decoder"] is True
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is False
    back = load_hf(out)
    assert back.config == model.config
    assert back.cls.predictions.decoder.weight is back.bert.embeddings.word_embeddings.weight
    ids = random_ids()
    with torch.no_grad():
        assert torch.equal(back(ids).mlm_logits, model(ids).mlm_logits)

    transformers = pytest.importorskip("transformers")
    hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    assert hf_tok("the cat")["input_ids"][0] == hf_tok.cls_token_id == 2


def test_save_is_deterministic(tmp_path):
    torch.manual_seed(0)
    model = BertForPreTraining(tiny())
    save_hf(model, tmp_path / "a")
    save_hf(model, tmp_path / "b")
    for name in ("config.json", "model.safetensors"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_fine_tuning_start_reports_fresh_head(tmp_path, caplog):
    torch.manual_seed(0)
    pretrained = BertForPreTraining(tiny())
    save_hf(pretrained, tmp_path / "pre")
    with caplog.at_level(logging.WARNING, logger="pipeline.model.hf"):
        clf = load_hf(tmp_path / "pre", BertForSequenceClassification, num_labels=3)
    assert "classifier.weight" in caplog.text and "encoder" not in caplog.text
    assert torch.equal(clf.bert.pooler.dense.weight, pretrained.bert.pooler.dense.weight)
    save_hf(clf, tmp_path / "clf")
    assert load_hf(tmp_path / "clf", BertForSequenceClassification).num_labels == 3


def test_load_errors_name_the_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_hf(tmp_path / "nowhere")
    folder = tmp_path / "m"
    folder.mkdir()
    with pytest.raises(FileNotFoundError, match=r"config\.json not found"):
        load_hf(folder)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is unreadable"):
        load_hf(folder)
    save_hf(BertForPreTraining(tiny()), folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(f"no model.safetensors or pytorch_model.bin in {folder}")):
        load_hf(folder)
    (folder / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=re.escape(f"{folder / 'model.safetensors'} is unreadable")):
        load_hf(folder)


def test_incomplete_encoder_is_an_error(tmp_path):
    from safetensors.torch import load_file, save_file

    save_hf(BertForPreTraining(tiny()), tmp_path / "m")
    path = tmp_path / "m" / "model.safetensors"
    state = load_file(path)
    del state["bert.encoder.layer.1.output.dense.weight"]
    save_file(state, path)
    with pytest.raises(ValueError, match=r"lacks 1 encoder weight.*layer\.1\.output\.dense\.weight"):
        load_hf(tmp_path / "m")


def test_config_mismatch_is_a_clear_error(tmp_path):
    save_hf(BertForPreTraining(tiny()), tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config["vocab_size"] = 50
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="do not fit BertForPreTraining"):
        load_hf(tmp_path / "m")
    config["num_attention_heads"] = 5
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="model.hidden_size=32 is not allowed: expected a multiple of"):
        load_hf(tmp_path / "m")


def test_the_nsp_loss_weight_scales_the_nsp_term_alone():
    model, ids, masked = _masked_batch()
    with torch.no_grad():
        out = model(ids, masked_positions=masked)
    nsp_labels = torch.tensor([0, 1])
    total, mlm, nsp = pretraining_loss(out, ids[masked], nsp_labels)
    assert torch.equal(total, mlm + nsp)  # BERT's: the two summed, bit for bit
    weighted, mlm3, nsp3 = pretraining_loss(out, ids[masked], nsp_labels, nsp_weight=3.0)
    assert torch.equal(mlm3, mlm) and torch.equal(nsp3, nsp)
    torch.testing.assert_close(weighted, mlm + 3.0 * nsp)
