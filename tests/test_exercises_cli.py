"""`python -m attnbook.exercises chNN answers.py` checks a learner's .py file."""
import subprocess
import sys
import textwrap

import pytest

from attnbook.exercises.__main__ import chapter_name, main

CH03_RIGHT = '''
import math
import torch

def batched_attention(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    top = scores.amax(-1, keepdim=True)
    scores = scores - top.masked_fill(top == float("-inf"), 0.0)
    return scores.exp() / scores.exp().sum(-1, keepdim=True).clamp_min(1e-30) @ value

def attention_pool(x, query, lengths):
    real = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    scores = (x @ query / math.sqrt(x.shape[-1])).masked_fill(~real, float("-inf"))
    return (torch.softmax(scores, dim=1)[:, :, None] * x).sum(1)

def window_causal_mask(num_queries, num_keys, window):
    position = num_keys - num_queries + torch.arange(num_queries)[:, None]
    key = torch.arange(num_keys)[None, :]
    return (key <= position) & (key > position - window)

def pe_similarity(offsets, d_model):
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cos(offsets.double()[:, None] * inv_freq).sum(-1).float()

prediction_position_accuracy = 0.9

prediction_row_sums = 1.0

def position_accuracy(model, tokens):
    model.eval()
    with torch.no_grad():
        answers = model(tokens).argmax(-1)[..., 0]
    return (answers == tokens.flip(1)).float().mean(0)

class SelfAttention(torch.nn.Module):
    def __init__(self, d_model, bias=True, dropout=0.0):
        super().__init__()
        self.q_proj = torch.nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = torch.nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = torch.nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = torch.nn.Linear(d_model, d_model, bias=bias)
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, x, mask=None):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        scores = q @ k.mT / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return self.out_proj(self.dropout(torch.softmax(scores, dim=-1)) @ v)

if __name__ == "__main__":
    raise SystemExit("the checker must not run this block")
'''


def _write(tmp_path, text, name="answers.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_all_right_exits_0(tmp_path, capsys):
    assert main(["ch03", str(_write(tmp_path, CH03_RIGHT))]) == 0
    out = capsys.readouterr().out
    assert out.count("✓") == 9 and "ch03: 7 of 7 exercises pass" in out
    assert "your prediction, 90.0%, is above the measured range" in out


def test_a_measurement_without_its_prediction(tmp_path, capsys):
    """The CLI passes prediction_position_accuracy to exercise 4's checker; without it, not done."""
    text = CH03_RIGHT.replace("prediction_position_accuracy = 0.9", "")
    assert main(["ch03", str(_write(tmp_path, text))]) == 1
    out = capsys.readouterr().out
    assert "write your prediction" in out and "ch03: 6 of 7 exercises pass" in out


def test_one_wrong_one_missing_exits_1(tmp_path, capsys):
    text = CH03_RIGHT.replace("/ math.sqrt(x.shape[-1])", "")
    text = text.replace("def pe_similarity", "def pe_similarity_draft")
    assert main(["3", str(_write(tmp_path, text))]) == 1
    out = capsys.readouterr().out
    assert "the scores look unscaled" in out
    assert "✗ pe_similarity: answers.py defines no `pe_similarity`; write `def pe_similarity(...)`" in out
    assert "ch03: 5 of 7 exercises pass" in out


def test_a_name_that_is_not_a_function(tmp_path, capsys):
    assert main(["ch04", str(_write(tmp_path, "split_heads_strided = 3\n"))]) == 1
    assert "`split_heads_strided` in answers.py is a int, not a function" in capsys.readouterr().out


def test_a_file_that_does_not_run(tmp_path, capsys):
    assert main(["ch01", str(_write(tmp_path, "import torch\nraise RuntimeError('oops')\n"))]) == 2
    assert "answers.py could not be run: RuntimeError: oops (line 2)" in capsys.readouterr().out


def test_missing_file_and_unknown_chapter(tmp_path, capsys):
    assert main(["ch01", str(tmp_path / "nope.py")]) == 2
    assert main(["ch42", str(tmp_path / "nope.py")]) == 2
    out = capsys.readouterr().out
    assert "no such file" in out and "unknown chapter 'ch42'" in out


def test_listing_names_every_function(capsys):
    assert main(["ch05"]) == 0
    out = capsys.readouterr().out
    for name in ("encoder_layer(", "label_smoothed_loss(", "greedy_decode(", "beam_search("):
        assert name in out


@pytest.mark.parametrize(("text", "name"), [("ch03", "ch03"), ("3", "ch03"), ("03", "ch03"), ("CH1", "ch01")])
def test_chapter_names(text, name):
    assert chapter_name(text) == name


def test_runs_as_a_module(tmp_path):
    """The real command line, in a fresh interpreter: the exit status says whether all pass."""
    path = _write(tmp_path, CH03_RIGHT)
    done = subprocess.run([sys.executable, "-m", "attnbook.exercises", "ch03", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    stub = _write(tmp_path, "def attention_pool(x, q, n):\n    raise NotImplementedError\n", "stub.py")
    done = subprocess.run([sys.executable, "-m", "attnbook.exercises", "ch03", str(stub)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "not done yet" in done.stdout
