"""BERT from the library's blocks equals transformers' BertModel and sentence-transformers, with the same weights."""
import json
import random

import pytest
import torch

from attnbook.checkpoints import MINILM_SHA256, CheckpointError, load_checkpoint, minilm_dir
from attnbook.checks import count_parameters
from attnbook.data.bible import load_bible
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.models.bert import (
    HF_IGNORE, HF_RENAME, Bert, BertConfig, BertForPreTraining, load_pretrained_bert, mean_pool, sentence_embeddings,
)

transformers = pytest.importorskip("transformers")
transformers.utils.logging.disable_progress_bar()


@pytest.fixture(scope="module")
def ours():
    return load_pretrained_bert(minilm_dir(), MINILM_SHA256)


@pytest.fixture(scope="module")
def reference():
    return transformers.BertModel.from_pretrained(str(minilm_dir()), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def verses():
    return random.Random(6).sample([v.text for v in load_bible()], 12)


@pytest.fixture(scope="module")
def batch(verses):
    inputs = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt").encode_batch(verses)
    assert not inputs.token_mask.all(), "the batch must contain padding"
    return inputs


def test_parameter_counts_from_the_config():
    assert BertConfig.base().num_parameters() == 109_482_240
    assert BertConfig.large().num_parameters() == 335_141_888
    assert BertConfig.minilm_l6().num_parameters() == 22_713_216
    for config in (BertConfig.base(), BertConfig.minilm_l6(), BertConfig(num_layers=2, d_model=64, num_heads=4)):
        with torch.device("meta"):
            assert count_parameters(Bert(config)) == config.num_parameters()


def test_config_of_the_checkpoint_is_minilm():
    config = json.loads((minilm_dir() / "config.json").read_text())
    assert BertConfig.from_hf_config(config) == BertConfig.minilm_l6()


@pytest.mark.parametrize("bad, message", [
    ({"d_model": 100, "num_heads": 12}, "divisible by num_heads"),
    ({"num_layers": 0}, "num_layers"),
    ({"dropout": 1.0}, "dropout must be in"),
    ({"layer_norm_eps": 0.0}, "eps must be > 0"),
])
def test_config_validation(bad, message):
    with pytest.raises(ValueError, match=message):
        BertConfig(**bad)


@torch.no_grad()
def test_every_layer_equals_bert_model_on_a_padded_batch(ours, reference, batch):
    got = ours(batch.input_ids, batch.segment_ids, batch.token_mask, need_weights=True, all_layers=True)
    want = reference(input_ids=batch.input_ids, token_type_ids=batch.segment_ids,
                     attention_mask=batch.token_mask.long(), output_hidden_states=True, output_attentions=True)
    assert len(got.hidden_states) == len(want.hidden_states) == 7
    real = batch.token_mask[..., None]
    for layer, (a, b) in enumerate(zip(got.hidden_states, want.hidden_states)):
        assert ((a - b) * real).abs().max() <= 1e-5, f"layer {layer}"
        # Padding rows are read by nothing; there both float32 models drift from float64 by ~1e-4.
        assert (a - b).abs().max() <= 1e-3, f"layer {layer} (padding rows)"
    for layer, (a, b) in enumerate(zip(got.attentions, want.attentions)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=f"attention of layer {layer}")
    torch.testing.assert_close(ours.pool(got.hidden), want.pooler_output, atol=1e-5, rtol=0)


@torch.no_grad()
def test_sentence_embeddings_equal_sentence_transformers(ours, verses, batch):
    st = pytest.importorskip("sentence_transformers")
    model = st.SentenceTransformer(str(minilm_dir()), device="cpu")
    want = model.encode(verses, convert_to_tensor=True, batch_size=len(verses))
    got = sentence_embeddings(ours, batch.input_ids, batch.segment_ids, batch.token_mask)
    assert (got - want).abs().max() <= 1e-5


@torch.no_grad()
def test_a_miswired_model_fails_the_parity_check(reference, batch):
    table = tuple((p, r.replace("q_proj", "TMP").replace("k_proj", "q_proj").replace("TMP", "k_proj"))
                  for p, r in HF_RENAME)  # swap W^Q and W^K
    model = load_checkpoint(Bert(BertConfig.minilm_l6()), minilm_dir() / "model.safetensors", MINILM_SHA256,
                            table, HF_IGNORE).eval()
    want = reference(input_ids=batch.input_ids, attention_mask=batch.token_mask.long()).last_hidden_state
    got = model(batch.input_ids, None, batch.token_mask)
    assert ((got - want) * batch.token_mask[..., None]).abs().max() > 1e-2
    model = load_pretrained_bert(minilm_dir(), MINILM_SHA256)
    for layer in model.blocks:
        layer.norm_first = True  # the right weights in a pre-norm network
    got = model(batch.input_ids, None, batch.token_mask)
    assert ((got - want) * batch.token_mask[..., None]).abs().max() > 1e-2


def test_a_wrong_size_checkpoint_is_refused():
    with pytest.raises(CheckpointError, match="shape mismatch: embeddings.tokens.weight"):
        load_checkpoint(Bert(BertConfig(d_model=384, num_layers=6, num_heads=12,
                                                               d_ff=1536, vocab_size=1000)),
                        minilm_dir() / "model.safetensors", MINILM_SHA256, HF_RENAME, HF_IGNORE)
    with pytest.raises(CheckpointError, match=r"no place in the model: blocks.4.* \(32 in all\)"):
        load_checkpoint(Bert(BertConfig(d_model=384, num_layers=4, num_heads=12, d_ff=1536)),
                        minilm_dir() / "model.safetensors", MINILM_SHA256, HF_RENAME, HF_IGNORE)


def test_mean_pool_ignores_padding():
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 5, 3, generator=g)
    mask = torch.tensor([[True, True, False, False, False], [True] * 5])
    pooled = mean_pool(hidden, mask)
    torch.testing.assert_close(pooled[0], hidden[0, :2].mean(0))
    torch.testing.assert_close(pooled[1], hidden[1].mean(0))
    with pytest.raises(ValueError, match="must match hidden"):
        mean_pool(hidden, mask[:, :4])


@torch.no_grad()
def test_padding_does_not_change_real_tokens(ours, batch):
    row = 0
    n = int(batch.token_mask[row].sum())
    alone = ours(batch.input_ids[row:row + 1, :n], batch.segment_ids[row:row + 1, :n])
    padded = ours(batch.input_ids[row:row + 1], batch.segment_ids[row:row + 1], batch.token_mask[row:row + 1])
    torch.testing.assert_close(padded[:, :n], alone, atol=1e-5, rtol=0)


def test_pretraining_heads():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(vocab_size=50, d_model=16, num_layers=2, num_heads=2,
                                          d_ff=32, max_len=12, dropout=0.0)).eval()
    ids = torch.randint(5, 50, (3, 7))
    mask = torch.ones(3, 7, dtype=torch.bool)
    mlm, nsp = model(ids, None, mask)
    assert mlm.shape == (3, 7, 50) and nsp.shape == (3, 2)
    chosen = torch.zeros(3, 7, dtype=torch.bool)
    chosen[0, 2] = chosen[2, 5] = True
    some, _ = model(ids, None, mask, predict_at=chosen)
    torch.testing.assert_close(some, mlm[chosen])
    assert model.mlm.readout.weight is model.bert.embeddings.tokens.weight  # tied
    with pytest.raises(ValueError, match="predict_at must be a bool tensor"):
        model(ids, None, mask, predict_at=chosen.long())


def test_bad_inputs(ours):
    with pytest.raises(ValueError, match=r"input_ids must be \(B, T\)"):
        ours(torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="token_mask must be a bool tensor"):
        ours(torch.zeros(1, 4, dtype=torch.long), None, torch.ones(1, 4))
