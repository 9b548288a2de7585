import torch

from attnbook.data import build_vocabs, load_g2p, make_batch
from attnbook.decoding import greedy_decode
from attnbook.tasks.g2p import evaluate_g2p, predict
from attnbook.tasks.g2p import G2PRecipe, train_g2p
from attnbook.models.rnn import GRUEncoder, RNNSeq2Seq, RNNSeq2SeqConfig


def _setup():
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    torch.manual_seed(0)
    return data, src_vocab, tgt_vocab, RNNSeq2Seq(RNNSeq2SeqConfig(len(src_vocab), len(tgt_vocab), 16, 24, 24))


def test_shapes_and_padding_invariance():
    data, sv, tv, model = _setup()
    model.eval()
    batch = make_batch(data.train[:5], sv, tv)
    logits = model(batch.src, batch.src_lengths, batch.tgt_in)
    assert logits.shape == (5, batch.tgt_in.shape[1], len(tv))
    # one word alone gives the same logits as inside a padded batch
    alone = make_batch(data.train[:1], sv, tv)
    torch.testing.assert_close(model(alone.src, alone.src_lengths, alone.tgt_in)[0],
                               logits[0, : alone.tgt_in.shape[1]])


def test_step_by_step_decoding_matches_teacher_forcing():
    data, sv, tv, model = _setup()
    model.eval()
    batch = make_batch(data.dev[:4], sv, tv)
    full = model(batch.src, batch.src_lengths, batch.tgt_in)
    state = model.start(batch.src, batch.src_lengths)
    for t in range(batch.tgt_in.shape[1]):
        step_logits, state = model.step(batch.tgt_in[:, t], state)
        torch.testing.assert_close(step_logits, full[:, t])


def test_greedy_decode_respects_max_len_and_eos():
    data, sv, tv, model = _setup()
    batch = make_batch(data.dev[:3], sv, tv)
    out = greedy_decode(model, batch.src, batch.src_lengths, tv.bos_id, tv.eos_id, max_len=4)
    assert len(out) == 3 and all(len(row) <= 4 for row in out)
    assert all(tv.eos_id not in row for row in out)


def test_encoder_rejects_mismatched_lengths():
    enc = GRUEncoder(10, 4, 4)
    try:
        enc(torch.ones(2, 3, dtype=torch.long), torch.tensor([3]))
    except ValueError as err:
        assert "src_lengths must have shape (2,)" in str(err)
    else:
        raise AssertionError("no error for mismatched lengths")


def test_a_short_training_run_learns_something():
    data, sv, tv, model = _setup()
    before = evaluate_g2p(model, data.dev[:100], sv, tv).per
    history = train_g2p(model, data, sv, tv, G2PRecipe(steps=60, batch_size=32, lr=1e-2), progress=False)
    after = evaluate_g2p(model, data.dev[:100], sv, tv)
    assert sum(history.losses[-10:]) < 0.8 * sum(history.losses[:10])
    assert after.per < before
    assert predict(model, [data.dev[0][0]], sv, tv) == after.predictions[:1]
    assert len(after.wer_by_length) >= 3


def test_reorder_state_keeps_the_chosen_rows_and_beam_of_one_is_greedy():
    from attnbook.decoding import beam_search

    data, sv, tv, model = _setup()
    model.eval()
    batch = make_batch(data.dev[:3], sv, tv)
    state = model.start(batch.src, batch.src_lengths)
    index = torch.tensor([2, 0, 0])
    moved = model.reorder_state(state, index)
    torch.testing.assert_close(moved.hidden, state.hidden[:, index])
    torch.testing.assert_close(moved.context, state.context[index])
    args = (batch.src, batch.src_lengths, tv.bos_id, tv.eos_id, 12)
    assert beam_search(model, *args, beam_size=1) == greedy_decode(model, *args)
