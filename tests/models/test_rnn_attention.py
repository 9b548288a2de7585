"""The attention encoder-decoder (attnbook.models.rnn.RNNAttentionSeq2Seq)."""
import dataclasses
import math

import pytest
import torch

from attnbook.layers.masks import token_mask
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig
from attnbook.layers.scores import AdditiveScore, context_from_scores

V_SRC, V_TGT = 12, 9


def _model(**changes):
    torch.manual_seed(0)
    config = RNNAttentionSeq2SeqConfig(V_SRC, V_TGT, emb_dim=8, enc_hidden=6, dec_hidden=5, attn_hidden=7)
    return RNNAttentionSeq2Seq(dataclasses.replace(config, **changes)).eval()


def _batch():
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([6, 2, 4])
    src = torch.randint(4, V_SRC, (3, 6), generator=g)
    src[~token_mask(lengths, 6)] = 0  # pad id 0
    tgt_in = torch.randint(4, V_TGT, (3, 5), generator=g)
    return src, lengths, tgt_in


@pytest.mark.parametrize("score", ["additive", "bilinear"])
def test_forward_shapes_and_weights(score):
    model = _model(score=score)
    src, lengths, tgt_in = _batch()
    logits, weights = model(src, lengths, tgt_in, need_weights=True)
    assert logits.shape == (3, 5, V_TGT)
    assert weights.shape == (3, 5, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 5))
    pad = ~token_mask(lengths, 6)[:, None, :].expand(3, 5, 6)
    assert (weights[pad] == 0).all()  # exactly zero, not just small
    torch.testing.assert_close(model(src, lengths, tgt_in), logits)  # need_weights changes nothing else


@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_dot_scores_plug_into_the_same_decoder(score):
    model = _model(score=score, dec_hidden=12)  # dot scores need dec_hidden == 2 * enc_hidden
    src, lengths, tgt_in = _batch()
    assert model(src, lengths, tgt_in).shape == (3, 5, V_TGT)
    with pytest.raises(ValueError, match="same width"):
        _model(score=score)


def test_padded_batch_equals_one_sequence_at_a_time():
    model = _model()
    src, lengths, tgt_in = _batch()
    logits, weights = model(src, lengths, tgt_in, need_weights=True)
    for b in range(3):
        n = int(lengths[b])
        alone, w_alone = model(src[b : b + 1, :n], lengths[b : b + 1], tgt_in[b : b + 1], need_weights=True)
        torch.testing.assert_close(alone[0], logits[b], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(w_alone[0], weights[b, :, :n], atol=1e-6, rtol=1e-5)


def test_step_by_step_decoding_equals_teacher_forcing():
    model = _model()
    src, lengths, tgt_in = _batch()
    logits, weights = model(src, lengths, tgt_in, need_weights=True)
    state = model.start(src, lengths)
    for t in range(tgt_in.shape[1]):
        step_logits, state = model.step(tgt_in[:, t], state)
        torch.testing.assert_close(step_logits, logits[:, t])
        torch.testing.assert_close(state.weights, weights[:, t])


def test_additive_attention_equals_explicit_loops():
    """e_ij = vᵀ tanh(W s + U h_j), a = softmax over real j, C = Σ_j a_j h_j, one number at a time."""
    torch.manual_seed(0)
    score = AdditiveScore(query_dim=3, key_dim=4, hidden=5)
    s = torch.randn(2, 3)  # (B, Hd): s_{i-1}
    h = torch.randn(2, 4, 4)  # (B, S, 2He)
    lengths = torch.tensor([4, 2])
    W, U, v = score.W.weight, score.U.weight, score.v.weight[0]
    with torch.no_grad():
        for b in range(2):
            n = int(lengths[b])
            e = []
            for j in range(n):
                total = 0.0
                for a in range(5):
                    pre = sum(W[a, k] * s[b, k] for k in range(3)) + sum(U[a, k] * h[b, j, k] for k in range(4))
                    total += v[a] * math.tanh(pre)
                e.append(float(total))
            z = sum(math.exp(x) for x in e)
            a_loop = [math.exp(x) / z for x in e]
            c_loop = [sum(a_loop[j] * h[b, j, k] for j in range(n)) for k in range(4)]
            context, weights = context_from_scores(score(s[:, None], h), h, token_mask(lengths, 4)[:, None, :])
            torch.testing.assert_close(weights[b, 0, :n], torch.tensor(a_loop))
            torch.testing.assert_close(context[b, 0], torch.stack(c_loop).float())


def test_hard_attention_gives_no_gradient_to_the_alignment_model():
    soft, hard = _model(), _model(weighting="argmax")
    hard.load_state_dict(soft.state_dict())
    src, lengths, tgt_in = _batch()
    for model in (soft, hard):
        model.zero_grad()
        model(src, lengths, tgt_in).logsumexp(-1).sum().backward()
    score_soft, score_hard = soft.decoder.score, hard.decoder.score
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in score_soft.parameters())
    assert all(p.grad is None for p in score_hard.parameters())
    _, weights = hard(src, lengths, tgt_in, need_weights=True)
    assert ((weights == 0) | (weights == 1)).all()


def test_learns_a_small_batch():
    model = _model().train()
    src, lengths, tgt_in = _batch()
    targets = torch.roll(tgt_in, -1, dims=1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    losses = []
    for _ in range(60):
        loss = torch.nn.functional.cross_entropy(model(src, lengths, tgt_in).reshape(-1, V_TGT), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]


def test_bad_config_and_inputs_raise():
    with pytest.raises(ValueError, match="unknown weighting"):
        _model(weighting="hard")
    with pytest.raises(ValueError, match="unknown score"):
        _model(score="cosine")
    model = _model()
    src, lengths, tgt_in = _batch()
    with pytest.raises(ValueError, match="batch size"):
        model(src, lengths, tgt_in[:2])
