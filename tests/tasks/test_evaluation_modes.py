"""No hidden mode changes: every evaluation helper runs the model in eval mode and hands it back
with each submodule in the mode it had (train, eval, or a mix of the two)."""
import ast
from pathlib import Path

import pytest
import torch
from torch import nn

from attnbook.checkpoints import minilm_dir
from attnbook.data.byte_text import ByteVocab
from attnbook.data.digits import ImageSet
from attnbook.data.vocab import Vocab
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.models.bert import Bert, BertConfig, BertForPreTraining
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.models.rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.models.t5 import T5, T5Config
from attnbook.models.tagger import SelfAttentionTagger
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.tasks import g2p, g2p_search, image_classification, induction, language_modeling, masked_lm
from attnbook.tasks import reversal, tagging, text_classification, text_to_text, token_stream

TASKS = Path(__file__).resolve().parents[2] / "lib" / "attnbook" / "tasks"
LIBRARY = TASKS.parent


def _gpt() -> nn.Module:
    return GPT(GPTConfig(23, max_len=32, d_model=16, num_heads=2, d_ff=32, num_layers=1, dropout=0.1))


LETTERS, PHONEMES = Vocab("abcdefg"), Vocab("ABCDEFGHI")


def _seq2seq() -> nn.Module:
    return Transformer(TransformerConfig(len(LETTERS), len(PHONEMES), d_model=16, num_heads=2, d_ff=32,
                                         num_encoder_layers=1, num_decoder_layers=1, dropout=0.1))


BYTES = ByteVocab()


def _t5() -> nn.Module:
    return T5(T5Config(len(BYTES), d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1,
                       num_decoder_layers=1, dropout=0.1))


def _bert_for_pretraining():
    return BertForPreTraining(BertConfig(vocab_size=30, d_model=16, num_layers=1, num_heads=2,
                                         d_ff=32, max_len=12))


def _pretraining_batch():
    docs = [[[10 + (d + i) % 20, 11 + (d + i) % 19] for i in range(3)] for d in range(4)]
    return next(masked_lm.pair_batches(docs, 4, [0, 1, 2, 3], 1, 2, 0, 3, 30, 12, seed=0, random_low=10))


def _images() -> ImageSet:
    return ImageSet(torch.rand(6, 1, 8, 8), torch.arange(6) % 3)


def _image_model() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(64, 3))


def _rnn() -> nn.Module:
    return RNNSeq2Seq(RNNSeq2SeqConfig(len(LETTERS), len(PHONEMES), emb_dim=8, enc_hidden=8, dec_hidden=8))


# name -> (make the model, call the helper on it). Each helper in tasks/ that evaluates a model.
HELPERS = {
    "reversal.score_reversal": (
        lambda: reversal.train_reversal(8, 0, 3, 4), lambda m: reversal.score_reversal(
            m, reversal.random_pairs(4, torch.Generator().manual_seed(0), 3, 5))),
    "g2p.predict": (_seq2seq, lambda m: g2p.predict(m, ["abc", "fed"], LETTERS, PHONEMES)),
    "g2p.evaluate_g2p": (
        _seq2seq, lambda m: g2p.evaluate_g2p(m, [("abc", "AB"), ("gf", "C")], LETTERS, PHONEMES)),
    "g2p_search.exact_decode": (
        _rnn, lambda m: g2p_search.exact_decode(m, torch.tensor([[3, 4, 5]]), torch.tensor([3]), 1, 2, 4)),
    "g2p_search.sequence_log_prob": (
        _rnn, lambda m: g2p_search.sequence_log_prob(m, torch.tensor([[3, 4, 5]]), torch.tensor([3]), [4, 5],
                                                     1, 2)),
    "image_classification.predict": (_image_model, lambda m: image_classification.predict(m, _images().images)),
    "image_classification.accuracy": (_image_model, lambda m: image_classification.accuracy(m, _images())),
    "image_classification.shifted_accuracy": (
        _image_model, lambda m: image_classification.shifted_accuracy(m, _images(), 1, 0.0)),
    "tagging.tagging_accuracy": (
        lambda: SelfAttentionTagger(7, 8, 2, 5, num_outputs=2),
        lambda m: tagging.tagging_accuracy(m, torch.randint(7, (3, 5)), torch.randint(7, (3, 5, 2)))),
    "language_modeling.generate": (_gpt, lambda m: language_modeling.generate(m, torch.randint(23, (2, 3)), 4)),
    "language_modeling.generate_uncached": (
        _gpt, lambda m: language_modeling.generate_uncached(m, torch.randint(23, (2, 3)), 4)),
    "token_stream.model_loss": (_gpt, lambda m: token_stream.model_loss(m, torch.randint(23, (40,)), 8, 2)),
    "token_stream.position_losses": (
        _gpt, lambda m: token_stream.position_losses(m, torch.randint(23, (40,)), 8, 2)),
    "induction.first_copy_losses": (
        _gpt, lambda m: induction.first_copy_losses(m, *induction.repeated_segments(3, 12, 23, 2, 5))),
    "text_classification.encode_texts_by_layer": (
        lambda: Bert(BertConfig(d_model=16, num_layers=1, num_heads=2, d_ff=32)),
        lambda m: text_classification.encode_texts_by_layer(
            m, WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt"), ["in the beginning", "amen"])),
    "induction.half_losses": (
        _gpt, lambda m: induction.half_losses(m, *induction.repeated_segments(3, 12, 23, 2, 5))),
    "masked_lm.evaluate_pretraining": (
        _bert_for_pretraining, lambda m: masked_lm.evaluate_pretraining(m, [_pretraining_batch()])),
    "text_classification.encode_texts": (
        lambda: Bert(BertConfig(d_model=16, num_layers=1, num_heads=2, d_ff=32)),
        lambda m: text_classification.encode_texts(
            m, WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt"), ["in the beginning", "amen"])),
    "text_classification.cached_states": (
        lambda: Bert(BertConfig(d_model=16, num_layers=1, num_heads=2, d_ff=32)),
        lambda m: text_classification.cached_states(
            m, WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt"), ["in the beginning", "amen"],
            depth=1)),
    "text_classification.encode_texts_and_states": (
        lambda: Bert(BertConfig(d_model=16, num_layers=1, num_heads=2, d_ff=32)),
        lambda m: text_classification.encode_texts_and_states(
            m, WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt"), ["in the beginning", "amen"],
            keep_depth=1)),
    "text_to_text.generate_text": (
        _t5, lambda m: text_to_text.generate_text(m, ["abc", "de"], BYTES, max_len=4)),
    "text_classification.accuracy": (
        lambda: nn.Sequential(nn.Dropout(0.5), nn.Linear(4, 2)),
        lambda m: text_classification.accuracy(m, torch.randn(5, 4), torch.arange(5) % 2)),
}


def _set_mode(model: nn.Module, mode: str) -> nn.Module:
    model.train(mode != "eval")
    if mode == "mixed":  # a frozen first part, with one train-mode layer inside it (if it has layers)
        first = next(model.children())
        inner = list(first.eval().modules())[1:]
        if inner:
            inner[-1].train()
    return model


def _modes(model: nn.Module) -> list[bool]:
    return [m.training for m in model.modules()]


@pytest.mark.parametrize("mode", ["train", "eval", "mixed"])
@pytest.mark.parametrize("name", sorted(HELPERS))
def test_a_helper_evaluates_in_eval_mode_and_restores_every_mode(name, mode):
    make, call = HELPERS[name]
    torch.manual_seed(0)
    model = _set_mode(make(), mode)
    before = _modes(model)
    if mode == "mixed":
        assert len(set(before)) == 2, f"{name}: the mixed-mode model is not mixed"
    seen = []
    hooks = [m.register_forward_pre_hook(lambda m, args: seen.append(m.training)) for m in model.modules()]
    call(model)
    for hook in hooks:
        hook.remove()
    assert seen and not any(seen), f"{name} ran some submodule in train mode"
    assert _modes(model) == before, f"{name} did not hand the model back in the modes it was given"


def _evaluating_helpers() -> set[str]:
    """Functions of tasks/ that take a model (``model`` or ``probe``) and run without gradients."""
    found = set()
    for path in TASKS.glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                takes_model = {a.arg for a in node.args.args} & {"model", "probe"}
                no_grad = any("no_grad" in ast.unparse(d) for d in node.decorator_list)
                if takes_model and no_grad:
                    found.add(f"{path.stem}.{node.name}")
    return found


def test_every_evaluation_helper_is_checked_here():
    missing = _evaluating_helpers() - set(HELPERS)
    assert not missing, f"add these evaluation helpers to HELPERS: {sorted(missing)}"


def _raw_mode_changes(path: Path) -> list[str]:
    """``x.eval()`` / ``x.train(...)`` on a parameter ``x`` of an enclosing function."""
    found = []
    for func in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = {a.arg for a in func.args.args + func.args.kwonlyargs}
            for node in ast.walk(func):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("eval", "train") and isinstance(node.func.value, ast.Name)
                        and node.func.value.id in params):
                    found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_helper_switches_a_given_model_by_hand():
    paths = [*TASKS.glob("*.py"), LIBRARY / "metrics.py", LIBRARY / "attention_maps.py"]
    found = [hit for path in paths for hit in _raw_mode_changes(path)]
    assert not found, "use attnbook.train.evaluating, which restores the modes, instead of:\n" + "\n".join(found)


def test_the_raw_mode_check_catches_one(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def score(model, x):\n    model.eval()\n    return model(x)\n", encoding="utf-8")
    assert _raw_mode_changes(bad) == ["bad.py:2 model.eval()"]
