"""Every model, task helper and attention-map tool runs where its inputs are, and creates nothing
anywhere else.

On a GPU, a tensor the library makes from a shape without naming a device (``torch.arange(T)``,
``torch.zeros(B)``, ``torch.rand(shape, generator=g)``) lands on the CPU and crashes when it meets
the inputs ("Expected all tensors to be on the same device"). The CPU cannot see that bug, since
both sides are on the CPU. So these tests set a trap: inside ``stray_tensors_trapped()``, every
such tensor is made on PyTorch's ``meta`` device (shapes, no data), which mixes with nothing; any
library function that would have made one on the wrong device raises. Tensors made from data
(``torch.tensor(list)``, then ``.to(device)``) are left alone, and so is ``attnbook.data``, which
builds its batches on the CPU for the caller to move: that is how a batch gets built.

The device under test comes from the same switch as the notebooks: ``ATTNBOOK_DEVICE=cuda pytest``
runs every case on the GPU, inside the trap, and compares its outputs with the same case on the
CPU (same seeded weights). Without the switch the cases run on the CPU, inside the trap.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import pytest
import torch
from torch.overrides import TorchFunctionMode

import attnbook.data
from attnbook.attention_maps import attention_rollout, mean_attention_distance
from attnbook.data.byte_text import ByteVocab
from attnbook.data.digits import ImageSet
from attnbook.data.vocab import Vocab
from attnbook.data.wordpiece import SPECIAL_TOKENS, BertInputs, WordPieceTokenizer
from attnbook.decoding import beam_search, greedy_decode, greedy_decode_uncached
from attnbook.layers.tiled import tiled_attention
from attnbook.models.attention_only import AttentionOnly
from attnbook.models.bert import Bert, BertConfig, BertForPreTraining, sentence_embeddings
from attnbook.models.cnn import CNNConfig, SmallCNN
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.models.llama import Llama, LlamaConfig
from attnbook.models.rnn import (
    RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig, RNNSeq2Seq, RNNSeq2SeqConfig,
)
from attnbook.models.t5 import T5, T5Config
from attnbook.models.tagger import BlockTagger, SelfAttentionTagger
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.models.vit import ViT, ViTConfig
from attnbook.tasks import g2p, image_classification, induction, language_modeling, masked_lm, ngram_fill
from attnbook.tasks import span_corruption, tagging, text_classification, text_to_text
from attnbook.tasks import g2p_search, token_stream

DEVICE = torch.device(os.environ.get("ATTNBOOK_DEVICE", "cpu"))

# Factories that make a tensor from a shape: each must name its device inside the library.
SHAPE_FACTORIES = {
    torch.arange, torch.zeros, torch.ones, torch.full, torch.empty, torch.eye, torch.linspace,
    torch.logspace, torch.rand, torch.randn, torch.randint, torch.randperm,
}


DATA_LAYER = str(Path(attnbook.data.__file__).parent)  # builds batches on the CPU, by design


class _StrayTensorTrap(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in SHAPE_FACTORIES and kwargs.get("device") is None:
            caller = sys._getframe(1).f_code.co_filename
            if not caller.startswith(DATA_LAYER):
                kwargs["device"] = "meta"
        return func(*args, **kwargs)


@contextmanager
def stray_tensors_trapped():
    """Inside, a tensor made from a shape without a device lands on ``meta`` (see the module doc)."""
    with _StrayTensorTrap():
        yield


# --- the cases: each builds its model and inputs on a device and returns what to run -------------

CASES: dict[str, Callable[[torch.device], Callable[[], object]]] = {}


def case(build):
    CASES[build.__name__] = build
    return build


def seeded(make: Callable[[], torch.nn.Module], device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    return make().to(device).eval()


def seq2seq_batch(device):
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([7, 4, 2, 5])
    src = torch.randint(4, 11, (4, 7), generator=g)
    for row, n in enumerate(lengths.tolist()):
        src[row, n:] = 0
    return src.to(device), lengths.to(device), torch.randint(4, 13, (4, 6), generator=g).to(device)


def seq2seq_runs(model, device):
    src, lengths, tgt = seq2seq_batch(device)
    return lambda: {
        "logits": model(src, lengths, tgt),
        "greedy": greedy_decode(model, src, lengths, 1, 2, 8),
        "uncached": greedy_decode_uncached(model, src, lengths, 1, 2, 8),
    }


@case
def transformer(device):
    model = seeded(lambda: Transformer(TransformerConfig(11, 13, d_model=32, num_heads=4, d_ff=64,
                                                         norm_first=True)), device)
    runs = seq2seq_runs(model, device)
    src, lengths, tgt = seq2seq_batch(device)
    return lambda: {**runs(), "maps": model.attention_maps(src, lengths, tgt),
                    "beam": beam_search(model, src, lengths, 1, 2, 8, beam_size=3,
                                        length_penalty=0.6)}


@case
def rnn_seq2seq(device):
    return seq2seq_runs(seeded(lambda: RNNSeq2Seq(RNNSeq2SeqConfig(11, 13, 8, 16, 16)), device),
                        device)


@case
def rnn_attention(device):
    model = seeded(lambda: RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(11, 13, 8, 16, 16, 16)),
                   device)
    runs = seq2seq_runs(model, device)
    src, lengths, tgt = seq2seq_batch(device)
    return lambda: {**runs(), "weights": model(src, lengths, tgt, need_weights=True)}


def lm_tokens(device, vocab=19, shape=(3, 9)):
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(2)).to(device)


@case
def gpt(device):
    model = seeded(lambda: GPT(GPTConfig(vocab_size=19, max_len=16, d_model=32, num_heads=4,
                                         d_ff=64, num_layers=2)), device)
    tokens = lm_tokens(device)
    sample = dict(temperature=0.8, top_k=10, top_p=0.9)
    return lambda: {
        "logits": model(tokens, need_weights=True),
        "loss": language_modeling.next_token_loss(model, tokens),
        "greedy": language_modeling.generate(model, tokens[:, :4], 5),
        "uncached": language_modeling.generate_uncached(model, tokens[:, :4], 5),
        # a CPU generator (what seed_everything returns) drives sampling on every device
        "sampled": language_modeling.generate(model, tokens[:, :4], 5, **sample,
                                              generator=torch.Generator().manual_seed(3)),
        "held_out": token_stream.model_loss(model, tokens.flatten(), window=8, batch_size=2),
    }


@case
def llama(device):
    model = seeded(lambda: Llama(LlamaConfig(vocab_size=19, max_len=16, d_model=32, num_heads=4,
                                             num_kv_heads=2, d_ff=64, num_layers=2)), device)
    tokens = lm_tokens(device)
    return lambda: {
        "logits": model(tokens, need_weights=True),
        "loss": language_modeling.next_token_loss(model, tokens),
        "greedy": language_modeling.generate(model, tokens[:, :4], 5),
        "uncached": language_modeling.generate_uncached(model, tokens[:, :4], 5),
        "sampled": language_modeling.generate(model, tokens[:, :4], 5, temperature=0.8,
                                              generator=torch.Generator().manual_seed(3)),
    }


@case
def tiled(device):
    g = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 4, 37, 8, generator=g).to(device) for _ in range(3))  # (B, H, T, Dh)
    return lambda: {"plain": tiled_attention(q, k, v, block_size=8),
                    "causal": tiled_attention(q, k, v, block_size=8, causal=True)}


@case
def attention_only(device):
    model = seeded(lambda: AttentionOnly(vocab_size=17, max_len=12, d_model=32, num_heads=2,
                                         num_layers=2), device)
    tokens, lengths = induction.repeated_segments(4, 12, 17, 3, 5,
                                                  generator=torch.Generator().manual_seed(4))
    tokens, lengths = tokens.to(device), lengths.to(device)

    def run():
        logits, maps = model(tokens, need_weights=True)
        return {"logits": logits, "scores": induction.induction_scores(maps[-1], tokens),
                "halves": induction.half_losses(model, tokens, lengths),
                "targets": induction.induction_targets(tokens)}
    return run


@case
def bert(device):
    config = BertConfig(vocab_size=23, num_layers=2, num_heads=4, d_model=32, d_ff=64, max_len=16)
    model = seeded(lambda: BertForPreTraining(config), device)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 23, (3, 10), generator=g).to(device)
    segments = torch.randint(0, 2, (3, 10), generator=g).to(device)
    mask = torch.ones(3, 10, dtype=torch.bool, device=device)
    mask[1, 7:] = False

    def run():
        masked = masked_lm.mask_tokens(ids, mask, 4, 23, torch.Generator().manual_seed(5),
                                       random_low=5)
        mlm, nsp = model(masked.input_ids, segments, mask)
        labels = torch.tensor([0, 1, 0], device=device)
        batch = masked_lm.PretrainBatch(BertInputs(ids, segments, mask), masked, labels)
        return {"mlm": mlm, "nsp": nsp, "mlm_loss": masked_lm.mlm_loss(mlm, masked),
                "mlm_accuracy": masked_lm.mlm_accuracy(mlm, masked),
                "nsp_loss": masked_lm.nsp_loss(nsp, labels),
                "pretraining_loss": masked_lm.pretraining_loss(model, batch),
                "evaluation": masked_lm.evaluate_pretraining(model, [batch]),
                "layers": model.bert(ids, segments, mask, need_weights=True, all_layers=True),
                "sentences": sentence_embeddings(model.bert, ids, segments, mask)}
    return run


@case
def ngram_fill_rivals(device):
    """Chapter 6's count rivals: counted on the CPU, the fills returned where the ids are."""
    g = torch.Generator().manual_seed(4)
    sentences = [torch.randint(5, 23, (int(n),), generator=g).tolist()
                 for n in torch.randint(3, 12, (40,), generator=g)]
    fill = ngram_fill.NGramFill(sentences, 23, num_special=5, cls_id=2, sep_id=3, pad_id=0,
                                mask_id=4)
    best = ngram_fill.most_frequent_by_position(sentences, 23, range(5), length=16)
    bigrams = masked_lm.bigram_table(sentences, 23, 2, 3)
    ids = torch.randint(5, 23, (3, 10), generator=g)
    mask = torch.ones(3, 10, dtype=torch.bool)
    masked = masked_lm.mask_tokens(ids, mask, 4, 23, torch.Generator().manual_seed(5), random_low=5)
    masked = masked.to(device)

    def run():
        seen = masked.input_ids
        found = fill.smoothed(masked)
        return {"back_off": fill.back_off_fill(seen, ngram_fill.BACK_OFF["copy-or-5-gram"], 7),
                "position": ngram_fill.position_unigram_fill(seen, best, 4, 7),
                "right_bigram": ngram_fill.right_bigram_fill(seen, bigrams, range(5), 4, 7),
                "theta": fill.theta_rule(found, seen.shape, 1e-3),
                "nats": fill.nats(masked, found, lambda p: 0.5 * torch.ones_like(p))}
    return run


@case
def vit(device):
    model = seeded(lambda: ViT(ViTConfig(image_size=8, patch_size=2, d_model=32, num_heads=4,
                                         num_layers=2, d_ff=64)), device)
    images = torch.randn(6, 1, 8, 8, generator=torch.Generator().manual_seed(4)).to(device)
    labels = torch.arange(6, device=device) % 3
    data = ImageSet(images, labels)

    def run():
        logits, maps = model(images, need_weights=True)
        return {"logits": logits, "rollout": attention_rollout(maps, residual=0.5),
                "distance": mean_attention_distance(maps[-1], grid_size=4, patch_size=2),
                "loss": image_classification.classification_loss(model, (images, labels)),
                "predicted": image_classification.predict(model, images),
                "accuracy": image_classification.accuracy(model, data),
                "shifted": image_classification.shifted_accuracy(model, data, 2, fill=0.0)}
    return run


@case
def cnn(device):
    model = seeded(lambda: SmallCNN(CNNConfig()), device)
    images = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(4)).to(device)
    labels = torch.tensor([1, 2, 3, 4], device=device)
    return lambda: {"logits": model(images),
                    "loss": image_classification.classification_loss(model, (images, labels))}


@case
def tagger(device):
    model = seeded(lambda: SelfAttentionTagger(11, 16, 2, max_len=12, positional="learned",
                                               num_outputs=2), device)
    g = torch.Generator().manual_seed(6)
    tokens = torch.randint(0, 11, (3, 12), generator=g).to(device)
    targets = torch.randint(0, 11, (3, 12, 2), generator=g).to(device)
    targets[0, :3] = -100
    return lambda: {"loss": tagging.tagging_loss(model, (tokens, targets)),
                    "accuracy": tagging.tagging_accuracy(model, tokens, targets),
                    "weights": model(tokens, need_weights=True)}


@case
def block_tagger(device):
    model = seeded(lambda: BlockTagger(11, 16, 2, max_len=12, d_ff=32), device)
    tokens = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(7)).to(device)
    return lambda: {"weights": model(tokens, need_weights=True)}


@case
def t5(device):
    vocab = ByteVocab()
    model = seeded(lambda: T5(T5Config(len(vocab), d_model=32, num_heads=4, d_ff=64)), device)
    ids = [list(vocab.encode(word, eos=False)) for word in ("knight", "lamb", "light")]
    masks = [span_corruption.noise_mask(len(x), generator=torch.Generator().manual_seed(i))
             for i, x in enumerate(ids)]
    pairs = [span_corruption.corrupt(x, m, vocab.sentinel, vocab.eos_id) for x, m in zip(ids, masks)]
    batch = span_corruption.seq2seq_batch(pairs, vocab.pad_id).to(device)
    words = [("knight", ["N", "AY", "T"]), ("lamb", ["L", "AE", "M"])]
    return lambda: {
        "logits": model(batch.src, batch.src_lengths, batch.tgt_in),
        "maps": model.attention_maps(batch.src, batch.src_lengths, batch.tgt_in),
        "greedy": greedy_decode(model, batch.src, batch.src_lengths, vocab.pad_id, vocab.eos_id, 6),
        "uncached": greedy_decode_uncached(model, batch.src, batch.src_lengths, vocab.pad_id,
                                           vocab.eos_id, 6),
        "beam": beam_search(model, batch.src, batch.src_lengths, vocab.pad_id, vocab.eos_id, 6,
                            beam_size=2),
        "text": text_to_text.evaluate_text_g2p(model, words, vocab),
    }


@case
def g2p_evaluation(device):
    src_vocab, tgt_vocab = Vocab("abcdefg"), Vocab(["AH", "B", "K", "D", "EH"])
    model = seeded(lambda: Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=32,
                                                         num_heads=4, d_ff=64)), device)
    pairs = [("abc", ["AH", "B", "K"]), ("fed", ["D", "EH"]), ("g", ["B"])]
    return lambda: {"result": g2p.evaluate_g2p(model, pairs, src_vocab, tgt_vocab)}


@case
def g2p_exact_search(device):
    src_vocab, tgt_vocab = Vocab("abcdefg"), Vocab(["AH", "B", "K", "D", "EH"])
    model = seeded(lambda: RNNSeq2Seq(RNNSeq2SeqConfig(len(src_vocab), len(tgt_vocab), emb_dim=8,
                                                       enc_hidden=8, dec_hidden=8)), device)
    pairs = [("abc", ["AH", "B", "K"]), ("fed", ["D", "EH"]), ("g", ["B"])]
    return lambda: {"differ": g2p_search.compare_with_greedy(model, pairs, src_vocab, tgt_vocab,
                                                             extra_len=1)}


@case
def g2p_sequence_log_prob_from_cpu_inputs(device):
    """Chapter 1 scores a word's answers with inputs made on the CPU, whatever the model's device;
    benchmarks leave the lengths on the CPU."""
    vocab = Vocab("abcdefg")
    model = seeded(lambda: RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(len(vocab), len(vocab))),
                   device)
    transformer = seeded(lambda: Transformer(TransformerConfig(len(vocab), len(vocab), d_model=16,
                                                               num_heads=2, d_ff=32)), device)
    src, lengths = torch.tensor([[4, 5, 6]]), torch.tensor([3])  # on the CPU, as the chapter makes them
    tgt_in = torch.tensor([[vocab.bos_id, 4]], device=device)
    return lambda: {  # and the forward pass with lengths left on the CPU (benchmarks do this)
        "log_p": g2p_search.sequence_log_prob(model, src, lengths, [4, 5], vocab.bos_id, vocab.eos_id),
        "logits": model(src.to(device), lengths, tgt_in),
        "transformer_logits": transformer(src.to(device), lengths, tgt_in),
    }


@case
def text_features(device):
    config = BertConfig(vocab_size=9, num_layers=1, num_heads=2, d_model=16, d_ff=32, max_len=16)
    model = seeded(lambda: Bert(config), device)
    tokenizer = WordPieceTokenizer(list(SPECIAL_TOKENS) + ["in", "the", "light", "##s"])
    texts = ["in the light", "the lights", "light in the light"]

    def run():
        features = text_classification.encode_texts(model, tokenizer, texts, batch_size=2,
                                                    device=device)
        labels = torch.tensor([0, 1, 0])
        probe = text_classification.train_linear_probe(features, labels, 2, steps=3)
        return {"features": features,
                "by_layer": text_classification.encode_texts_by_layer(model, tokenizer, texts,
                                                                      batch_size=2, device=device),
                "accuracy": text_classification.accuracy(probe, features, labels)}
    return run


# --- the tests ------------------------------------------------------------------------------------

def flatten(out, prefix="") -> dict[str, object]:
    """Every tensor, number and token list in a nested result, by its path."""
    if isinstance(out, torch.Tensor):
        return {prefix: out}
    if dataclasses.is_dataclass(out):
        out = {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
    if isinstance(out, dict):
        return {k: v for key, value in out.items() for k, v in flatten(value, f"{prefix}.{key}").items()}
    if isinstance(out, (list, tuple)) and not all(isinstance(x, (int, str)) for x in out):
        return {k: v for i, x in enumerate(out) for k, v in flatten(x, f"{prefix}[{i}]").items()}
    return {prefix: out}  # a number, or a list of token ids or strings


@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_on_the_device_and_makes_no_tensor_elsewhere(name):
    run = CASES[name](DEVICE)
    with stray_tensors_trapped():
        results = flatten(run())
    for path, value in results.items():
        if isinstance(value, torch.Tensor) and value.dim() > 0 and path not in CPU_BY_DESIGN:
            assert value.device.type == DEVICE.type, f"{name}{path} is on {value.device}, not {DEVICE}"


# Results the library returns on the CPU on purpose, whatever the model's device.
CPU_BY_DESIGN = {
    ".predicted",  # image_classification.predict: class ids, for the CPU-side metrics
    ".features",  # text_classification.encode_texts: sentence embeddings, for the CPU probes
    ".by_layer",  # text_classification.encode_texts_by_layer: the same, at every depth
    ".theta",  # ngram_fill.NGramFill.theta_rule: ids from counts kept on the CPU
}


@pytest.mark.skipif(DEVICE.type == "cpu", reason="compares the device with the CPU (ATTNBOOK_DEVICE)")
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_device_agrees_with_the_cpu(name):
    on_device = flatten(CASES[name](DEVICE)())
    on_cpu = flatten(CASES[name](torch.device("cpu"))())
    assert on_device.keys() == on_cpu.keys()
    for path, want in on_cpu.items():
        got = on_device[path]
        if isinstance(want, torch.Tensor):
            # float32 on two devices: sums in another order; 1e-4 is > 10x what we measure
            torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4, msg=f"{name}{path}")
        elif isinstance(want, float):
            assert got == pytest.approx(want, abs=1e-4), f"{name}{path}"
        else:
            assert got == want, f"{name}{path}"


def test_the_trap_catches_a_tensor_made_without_its_device():
    """The bug the trap exists for, in the form it had in ``half_losses`` before issue 24."""
    tokens, lengths = torch.zeros(2, 6, dtype=torch.long), torch.tensor([2, 3])

    def positions_without_device(tokens, lengths):
        return torch.arange(1, tokens.shape[1]) < lengths[:, None]

    def positions_with_device(tokens, lengths):
        return torch.arange(1, tokens.shape[1], device=tokens.device) < lengths[:, None]

    positions_without_device(tokens, lengths)  # fine on the CPU: the bug does not show
    with stray_tensors_trapped():
        with pytest.raises(RuntimeError, match="device"):
            positions_without_device(tokens, lengths)
        assert positions_with_device(tokens, lengths).shape == (2, 5)
        assert torch.tensor([1, 2]).device.type == "cpu"  # made from data: left alone


def test_every_model_and_task_module_has_a_case():
    """A new model or task module must add a case here (or say why it needs none)."""
    import pkgutil

    import attnbook.models
    import attnbook.tasks

    covered = {
        "models": {"attention_only", "bert", "cnn", "encoder_decoder", "gpt", "llama", "rnn",
                   "t5", "tagger", "transformer", "vit"},
        "tasks": {"g2p", "g2p_search", "image_classification", "induction", "language_modeling", "masked_lm",
                  "ngram_fill",
                  "span_corruption", "tagging", "text_classification", "text_to_text",
                  "token_stream",
                  "count_baselines",  # counts over Python lists: no model, no device
                  "g2p_errors",  # counts over a G2PResult's lists: no model, no device
                  "g2p_budgets",  # reads committed results files: no model, no device
                  "reversal"},  # Chapter 1's live page-scale demo: a small RNN trained on CPU
    }
    for package in (attnbook.models, attnbook.tasks):
        group = package.__name__.rsplit(".", 1)[1]
        found = {m.name for m in pkgutil.iter_modules(package.__path__)}
        assert found <= covered[group], (
            f"attnbook.{group} has modules without a device case: {sorted(found - covered[group])}")
