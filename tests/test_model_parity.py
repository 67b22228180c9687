"""Our BERT against transformers' on random tiny models: same weights in, same numbers out."""
import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from pipeline.model.bert import (BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification,  # noqa: E402
                                 BertModel, pretraining_loss)
from pipeline.model_config import BertConfig  # noqa: E402
from pipeline.model.hf import load_hf, save_hf  # noqa: E402
from pipeline.model.hf import config_from_hf, config_to_hf  # noqa: E402
from conftest import TINY_BERT as TINY  # noqa: E402

ATOL = 1e-5


def hf_config(attn="sdpa", **overrides):
    return transformers.BertConfig(**{**TINY, **overrides}, attn_implementation=attn)


def ours_from(hf_model, cls=BertForPreTraining, **kwargs):
    model = cls(config_from_hf(hf_model.config.to_dict()), **kwargs).eval()
    model.load_state_dict(hf_model.state_dict(), strict=True)
    return model


@pytest.fixture
def batch():
    """Two segments per row, padding on two of the three rows."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, TINY["vocab_size"], (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[0, 6:] = 1
    types[1, 5:8] = 1
    types[2, 2:4] = 1
    return ids, types, mask


@pytest.fixture
def labels(batch):
    ids, _, mask = batch
    g = torch.Generator().manual_seed(1)
    masked = (torch.rand(ids.shape, generator=g) < 0.3) & mask.bool()
    masked[:, 1] = True  # at least one per row
    mlm = torch.where(masked, ids, torch.full_like(ids, -100))
    return masked, mlm, torch.tensor([0, 1, 1])


def close(a, b):
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_pretraining_logits_and_hidden_states(attn, batch):
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hf_config(attn)).eval()
    ours = ours_from(hf)
    ids, types, mask = batch
    with torch.no_grad():
        ref = hf(ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
        out = ours(ids, types, mask)
        enc = ours.bert(ids, types, mask, output_hidden_states=True)
    close(out.mlm_logits, ref.prediction_logits)
    close(out.nsp_logits, ref.seq_relationship_logits)
    assert len(enc.hidden_states) == TINY["num_hidden_layers"] + 1 == len(ref.hidden_states)
    for mine, theirs in zip(enc.hidden_states, ref.hidden_states):
        close(mine, theirs)
    close(enc.last_hidden_state, enc.hidden_states[-1])


def test_no_mask_and_no_token_types_match(batch):
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hf_config()).eval()
    ours = ours_from(hf)
    ids = batch[0]
    with torch.no_grad():
        close(ours(ids).mlm_logits, hf(ids).prediction_logits)
        all_ones = torch.ones_like(ids)
        close(ours(ids, attention_mask=all_ones).mlm_logits, hf(ids, attention_mask=all_ones).prediction_logits)


def test_loss_matches_and_gathered_logits_equal_full(batch, labels):
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hf_config()).eval()
    ours = ours_from(hf)
    ids, types, mask = batch
    masked, mlm, nsp = labels
    with torch.no_grad():
        ref = hf(ids, attention_mask=mask, token_type_ids=types, labels=mlm, next_sentence_label=nsp)
        full = ours(ids, types, mask)
        gathered = ours(ids, types, mask, masked_positions=masked)
    close(gathered.mlm_logits, full.mlm_logits[masked])
    total, mlm_loss, nsp_loss = pretraining_loss(full, mlm, nsp)
    close(total, ref.loss)
    g_total, g_mlm, g_nsp = pretraining_loss(gathered, ids[masked], nsp)
    close(g_total, ref.loss)
    close(g_mlm, mlm_loss)
    close(mlm_loss + nsp_loss, total)


@pytest.mark.parametrize("fused", [False, True], ids=["logits", "linear_cross_entropy"])
def test_gradients_match(batch, labels, fused):
    """Training parity, not just inference: the same loss gives the same gradients -- also on the pretraining
    module's path, where the LM loss is computed without logits (``mlm_targets``)."""
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hf_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    ours = ours_from(hf).train()
    hf.train()
    ids, types, mask = batch
    masked, mlm, nsp = labels
    hf(ids, attention_mask=mask, token_type_ids=types, labels=mlm, next_sentence_label=nsp).loss.backward()
    out = ours(ids, types, mask, masked_positions=masked, mlm_targets=ids[masked] if fused else None)
    pretraining_loss(out, ids[masked], nsp)[0].backward()
    theirs = dict(hf.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, theirs[name].grad, atol=1e-5, rtol=1e-4, msg=name)


def test_causal_matches_hf_decoder(batch):
    """Left-to-right mode is HF's is_decoder=True self-attention (no cross-attention)."""
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hf_config(is_decoder=True)).eval()
    ours = ours_from(hf)
    assert ours.config.causal
    ids, types, mask = batch
    with torch.no_grad():
        ref = hf(ids, attention_mask=mask, token_type_ids=types, use_cache=False)
        close(ours(ids, types, mask).mlm_logits, ref.prediction_logits)
        ref = hf(ids, token_type_ids=types, use_cache=False)
        close(ours(ids, types).mlm_logits, ref.prediction_logits)


@pytest.mark.parametrize("num_labels", [3, 1])
def test_sequence_classification(num_labels, batch, tmp_path):
    torch.manual_seed(0)
    hf = transformers.BertForSequenceClassification(hf_config(num_labels=num_labels)).eval()
    ours = ours_from(hf, BertForSequenceClassification, num_labels=num_labels)
    ids, types, mask = batch
    with torch.no_grad():
        ref = hf(ids, attention_mask=mask, token_type_ids=types).logits
        close(ours(ids, types, mask), ref)
        save_hf(ours, tmp_path / "cls")
        back = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "cls").eval()
        assert back.num_labels == num_labels
        close(back(ids, attention_mask=mask, token_type_ids=types).logits, ref)
        hf.save_pretrained(tmp_path / "hf")
        mine = load_hf(tmp_path / "hf", BertForSequenceClassification)
        assert mine.num_labels == num_labels
        close(mine(ids, types, mask), ref)


def test_save_hf_loads_in_transformers(batch, tmp_path):
    torch.manual_seed(0)
    ours = BertForPreTraining(BertConfig(**TINY)).eval()
    with torch.no_grad():
        ours.cls.predictions.bias.normal_()  # so a lost output bias would show
    ids, types, mask = batch
    save_hf(ours, tmp_path / "export")
    hf = transformers.BertForPreTraining.from_pretrained(tmp_path / "export").eval()
    assert hf.cls.predictions.decoder.weight.data_ptr() == hf.bert.embeddings.word_embeddings.weight.data_ptr()
    with torch.no_grad():
        mine, ref = ours(ids, types, mask), hf(ids, attention_mask=mask, token_type_ids=types)
    close(ref.prediction_logits, mine.mlm_logits)
    close(ref.seq_relationship_logits, mine.nsp_logits)
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"] and config["is_decoder"] is False


@pytest.mark.parametrize("shard_size", [None, "40KB"])
def test_load_hf_of_save_pretrained(shard_size, batch, tmp_path):
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hf_config()).eval()
    with torch.no_grad():
        hf.cls.predictions.bias.normal_()
    hf.save_pretrained(tmp_path / "hf", **({"max_shard_size": shard_size} if shard_size else {}))
    assert (tmp_path / "hf" / "model.safetensors.index.json").exists() == bool(shard_size)
    ours = load_hf(tmp_path / "hf")
    assert not ours.training
    assert ours.cls.predictions.decoder.weight is ours.bert.embeddings.word_embeddings.weight
    ids, types, mask = batch
    with torch.no_grad():
        close(ours(ids, types, mask).mlm_logits, hf(ids, attention_mask=mask, token_type_ids=types).prediction_logits)


def test_load_hf_legacy_bin_with_old_names(batch, tmp_path):
    """pytorch_model.bin, LayerNorm.gamma/beta, and a bare BertModel without the bert. prefix."""
    torch.manual_seed(0)
    hf = transformers.BertModel(hf_config()).eval()
    old = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
           for k, v in hf.state_dict().items()}
    old["embeddings.position_ids"] = torch.arange(TINY["max_position_embeddings"])[None]  # stored by old versions
    folder = tmp_path / "old"
    folder.mkdir()
    torch.save(old, folder / "pytorch_model.bin")
    (folder / "config.json").write_text(json.dumps(hf.config.to_dict()))
    ids, types, mask = batch
    with torch.no_grad():
        ref = hf(ids, attention_mask=mask, token_type_ids=types)
        bare = load_hf(folder, BertModel)
        close(bare(ids, types, mask).last_hidden_state, ref.last_hidden_state)
        clf = load_hf(folder, BertForSequenceClassification, num_labels=2)  # bert. prefix added
        close(clf.bert(ids, types, mask).pooler_output, ref.pooler_output)


def test_config_json_is_hf_config():
    config = BertConfig(**TINY, hidden_act="gelu_new")
    theirs = transformers.BertConfig(**config_to_hf(config))
    for key, value in config_to_hf(config).items():
        assert getattr(theirs, key) == value, key


def test_question_answering(batch, tmp_path):
    """Start and end logits equal transformers' BertForQuestionAnswering, loaded through its own folder."""
    torch.manual_seed(0)
    hf = transformers.BertForQuestionAnswering(hf_config()).eval()
    ids, types, mask = batch
    hf.save_pretrained(tmp_path / "qa")
    ours = load_hf(tmp_path / "qa", BertForQuestionAnswering)
    assert set(ours.state_dict()) == set(hf.state_dict())  # no pooler, qa_outputs: Hugging Face's names
    with torch.no_grad():
        ref = hf(ids, attention_mask=mask, token_type_ids=types)
        logits = ours(ids, types, mask)
    close(logits[..., 0], ref.start_logits)
    close(logits[..., 1], ref.end_logits)


def test_question_answering_starts_from_a_pretraining_export(tmp_path):
    """From a pretraining export: the encoder loaded, qa_outputs freshly initialised, the MLM/NSP heads dropped."""
    torch.manual_seed(0)
    pre = BertForPreTraining(BertConfig(**TINY))
    save_hf(pre, tmp_path / "export")
    qa = load_hf(tmp_path / "export", BertForQuestionAnswering)
    torch.testing.assert_close(qa.bert.encoder.state_dict(), pre.bert.encoder.state_dict())
    assert qa.qa_outputs.weight.shape == (2, TINY["hidden_size"]) and qa.qa_outputs.bias.abs().sum() == 0


# ------------------------------------------------------------------- the pre-LayerNorm stack


def pre_ln_pair():
    """Our pre-LayerNorm BERT with every weight random (LayerNorms and biases too, so a misplaced one shows)."""
    torch.manual_seed(0)
    ours = BertForPreTraining(BertConfig(**TINY, layer_norm="pre")).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_(0, 0.2).add_(1.0 if p.ndim == 1 else 0.0)
    return ours


def test_pre_layer_norm_export_is_transformers_roberta_prelayernorm(batch, tmp_path):
    """The export loads as RobertaPreLayerNormForMaskedLM (positions offset by pad + 1) and gives our logits and
    final hidden state at every real token."""
    ours = pre_ln_pair()
    ids, types, mask = batch
    save_hf(ours, tmp_path / "export")
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["model_type"] == "roberta-prelayernorm"
    assert config["architectures"] == ["RobertaPreLayerNormForMaskedLM"]
    assert config["max_position_embeddings"] == TINY["max_position_embeddings"] + TINY.get("pad_token_id", 0) + 1
    hf = transformers.RobertaPreLayerNormForMaskedLM.from_pretrained(tmp_path / "export").eval()
    with torch.no_grad():
        mine = ours(ids, types, mask)
        ref = hf(ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
    real = mask.bool()
    close(mine.mlm_logits[real], ref.logits[real])
    close(mine.hidden[real], hf.roberta_prelayernorm(ids, attention_mask=mask, token_type_ids=types)
          .last_hidden_state[real].detach())


def test_pre_layer_norm_export_round_trips_its_weights(tmp_path):
    """load_hf reads the RoBERTa-PreLayerNorm folder back into our model: every weight (NSP head and pooler
    included) to 1e-6, and the folder's architecture is BERT's."""
    from pipeline.architectures import architecture_of

    ours = pre_ln_pair()
    save_hf(ours, tmp_path / "export")
    back = load_hf(tmp_path / "export")
    assert back.config == ours.config and back.config.layer_norm == "pre"
    mine, theirs = ours.state_dict(), back.state_dict()
    assert set(mine) == set(theirs)
    for key in mine:
        torch.testing.assert_close(theirs[key], mine[key], atol=1e-6, rtol=0, msg=key)
    arch = architecture_of(tmp_path / "export")
    assert arch.name == "bert" and arch.language_model(tmp_path / "export").config.layer_norm == "pre"
    encoder = arch.encoder(tmp_path / "export")  # the frozen features' network: the final LayerNorm included
    torch.testing.assert_close(encoder.LayerNorm.weight, ours.bert.LayerNorm.weight, atol=1e-6, rtol=0)


def test_post_layer_norm_export_is_unchanged_by_the_setting(tmp_path):
    """BERT's own (post-LayerNorm) config.json carries no layer_norm key, and its state dict BERT's names only."""
    ours = BertForPreTraining(BertConfig(**TINY))
    assert not any(k.endswith(("attention.LayerNorm.weight", "intermediate.LayerNorm.weight")) for k in ours.state_dict())
    assert "layer_norm" not in config_to_hf(ours.config)
    assert config_from_hf(config_to_hf(ours.config)).layer_norm == "post"


def test_pre_layer_norm_refuses_what_it_cannot_export():
    from pipeline.errors import DataError

    with pytest.raises(DataError, match="model.hidden_act='relu' with model.layer_norm=pre"):
        config_to_hf(BertConfig(**TINY, layer_norm="pre", hidden_act="relu"))
    with pytest.raises(Exception, match="model.layer_norm='middle' is not allowed: expected one of post, pre"):
        BertConfig(**TINY, layer_norm="middle")


def test_a_pre_layer_norm_export_fine_tunes_as_a_pre_layer_norm_bert(tmp_path):
    """The fine-tuning stage's task model from the export: its encoder the export's (final LayerNorm included),
    and from scratch the same pre-LayerNorm network freshly initialised."""
    from pipeline.architectures import open_export

    ours = pre_ln_pair()
    save_hf(ours, tmp_path / "export")
    export = open_export(tmp_path / "export")
    tuned = export.task_model("sentence", 3, pretrained=True, pooling="mean")
    mine, theirs = ours.bert.state_dict(), tuned.bert.state_dict()
    assert set(theirs) == set(mine) - {"pooler.dense.weight", "pooler.dense.bias"} or set(theirs) == set(mine)
    for key in theirs:
        torch.testing.assert_close(theirs[key], mine[key], atol=1e-6, rtol=0, msg=key)
    scratch = export.task_model("sentence", 3, pretrained=False, pooling="mean")
    assert scratch.bert.config.layer_norm == "pre" and "LayerNorm.weight" in scratch.bert.state_dict()
