"""Every model entry point says what was expected and what was given: token ids outside the
vocabulary, float ids, empty sequences or prompts, segment ids outside the segment count."""
import pytest
import torch

from attnbook.models.attention_only import AttentionOnly
from attnbook.models.bert import Bert, BertConfig
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig, RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.models.tagger import SelfAttentionTagger
from attnbook.models.transformer import Transformer, TransformerConfig

SRC, TGT = 11, 13
LENGTHS = torch.tensor([3, 2])


def _seq2seq_models():
    return [Transformer(TransformerConfig(SRC, TGT, d_model=16, num_heads=2, d_ff=32)),
            RNNSeq2Seq(RNNSeq2SeqConfig(SRC, TGT, emb_dim=8, enc_hidden=8, dec_hidden=8)),
            RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(SRC, TGT, emb_dim=8, enc_hidden=8, dec_hidden=8))]


@pytest.mark.parametrize("model", _seq2seq_models(), ids=lambda m: type(m).__name__)
def test_seq2seq_models_check_their_token_ids(model):
    src, tgt = torch.randint(1, SRC, (2, 3)), torch.randint(1, TGT, (2, 4))
    with pytest.raises(ValueError, match=rf"src must lie in \[0, {SRC}\) \(the vocabulary\), got ids from 0 to {SRC}"):
        model(torch.tensor([[1, 2, SRC], [1, 2, 0]]), LENGTHS, tgt)
    with pytest.raises(ValueError, match=rf"tgt_in must lie in \[0, {TGT}\)"):
        model(src, LENGTHS, torch.full((2, 4), -1))
    with pytest.raises(TypeError, match="integer token ids, got dtype torch.float32"):
        model(src.float(), LENGTHS, tgt)
    with pytest.raises(ValueError, match=r"src is empty"):
        model.start(torch.zeros(2, 0, dtype=torch.long), LENGTHS)
    state = model.start(src, LENGTHS)
    with pytest.raises(ValueError, match=rf"tokens must lie in \[0, {TGT}\)"):
        model.step(torch.tensor([1, TGT + 5]), state)


def test_decoder_only_models_reject_empty_prompts_and_unknown_ids():
    gpt = GPT(GPTConfig(vocab_size=19, max_len=8, d_model=16, num_heads=2, d_ff=32, num_layers=1))
    with pytest.raises(ValueError, match=r"tokens is empty \(shape \(1, 0\)\)"):
        gpt.start(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, 19\).*got ids from 0 to 19"):
        gpt(torch.tensor([[0, 19]]))
    _, state = gpt.start(torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, 19\)"):
        gpt.step(torch.tensor([25]), state)
    with pytest.raises(ValueError, match="exceed max_len=8"):
        gpt(torch.zeros(1, 9, dtype=torch.long))
    tiny = AttentionOnly(vocab_size=7, max_len=6, d_model=8, num_heads=2, num_layers=1)
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, 7\)"):
        tiny(torch.tensor([[3, 7]]))
    tagger = SelfAttentionTagger(vocab_size=5, d_model=8, num_heads=2, max_len=6)
    with pytest.raises(ValueError, match=r"tokens must be \(B, T\) token ids, got shape \(4,\)"):
        tagger(torch.tensor([1, 2, 3, 4]))


def test_bert_checks_input_and_segment_ids():
    bert = Bert(BertConfig(vocab_size=30, d_model=16, num_layers=1, num_heads=2, d_ff=32, max_len=8))
    ids = torch.randint(0, 30, (2, 5))
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 30\)"):
        bert(ids + 30)
    with pytest.raises(ValueError, match=r"segment_ids must lie in \[0, 2\).*got ids from 0 to 2"):
        bert(ids, torch.tensor([[0, 1, 2, 0, 0], [0, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match=r"segment_ids must have the shape of input_ids \(2, 5\), got \(2, 4\)"):
        bert(ids, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="longer than max_len=8"):
        bert(torch.zeros(1, 9, dtype=torch.long))
