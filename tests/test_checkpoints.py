"""Safe checkpoint loading: hash check, safetensors only, explicit renames, and every bad-file error."""
import hashlib
import pickle

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from attnbook.checkpoints import (
    MINILM_SHA256, CheckpointError, load_checkpoint, load_state_strict, minilm_dir, read_safetensors,
    rename_tensors, sha256_of, verify_sha256,
)

TABLE = (
    (r"enc\.(\d+)\.w", r"layers.\1.weight"),
    (r"enc\.(\d+)\.b", r"layers.\1.bias"),
)


class Tiny(nn.Module):
    def __init__(self, width=3):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width), nn.Linear(width, width)])


def _checkpoint(width=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {f"enc.{i}.{p}": torch.randn(*((width, width) if p == "w" else (width,)), generator=g)
            for i in range(2) for p in ("w", "b")}


@pytest.fixture
def good_file(tmp_path):
    path = tmp_path / "tiny.safetensors"
    save_file(_checkpoint(), str(path))
    return path


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_loads_renamed_weights_exactly(good_file):
    model = load_checkpoint(Tiny(), good_file, _sha(good_file), TABLE)
    ckpt = _checkpoint()
    torch.testing.assert_close(model.layers[1].weight, ckpt["enc.1.w"], rtol=0, atol=0)
    torch.testing.assert_close(model.layers[0].bias, ckpt["enc.0.b"], rtol=0, atol=0)


def test_sha256_of_matches_hashlib(good_file):
    assert sha256_of(good_file) == _sha(good_file)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint file not found: .*nowhere.safetensors"):
        load_checkpoint(Tiny(), tmp_path / "nowhere.safetensors", "0" * 64, TABLE)


def test_wrong_hash_is_refused_before_reading(good_file):
    with pytest.raises(CheckpointError, match="SHA-256 mismatch for tiny.safetensors: expected 0{64}, got "):
        load_checkpoint(Tiny(), good_file, "0" * 64, TABLE)


def test_a_hash_that_is_not_hex_is_a_usage_error(good_file):
    with pytest.raises(ValueError, match="64 hex digits"):
        verify_sha256(good_file, "abc")


def test_a_pickle_is_not_read(tmp_path):
    path = tmp_path / "evil.safetensors"
    path.write_bytes(pickle.dumps(_checkpoint()))
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        read_safetensors(path, None)


def test_missing_tensor(tmp_path):
    state = _checkpoint()
    del state["enc.1.b"]
    path = tmp_path / "missing.safetensors"
    save_file(state, str(path))
    with pytest.raises(CheckpointError, match=r"missing tensor\(s\) the model needs: layers.1.bias"):
        load_checkpoint(Tiny(), path, _sha(path), TABLE)


def test_unexpected_tensor_matched_by_no_rule(tmp_path):
    state = _checkpoint() | {"pooler.w": torch.zeros(3, 3)}
    path = tmp_path / "extra.safetensors"
    save_file(state, str(path))
    with pytest.raises(CheckpointError, match=r"unexpected tensor\(s\).*matched by no rename rule: pooler.w"):
        load_checkpoint(Tiny(), path, _sha(path), TABLE)
    # the same file loads when that tensor is deliberately ignored
    load_checkpoint(Tiny(), path, _sha(path), TABLE, ignore=(r"pooler\..*",))


def test_renamed_tensor_with_no_place_in_the_model(tmp_path):
    state = _checkpoint() | {"enc.7.w": torch.zeros(3, 3)}
    path = tmp_path / "deeper.safetensors"
    save_file(state, str(path))
    with pytest.raises(CheckpointError, match=r"no place in the model: layers.7.weight"):
        load_checkpoint(Tiny(), path, _sha(path), TABLE)


def test_shape_mismatch(tmp_path):
    path = tmp_path / "wide.safetensors"
    save_file(_checkpoint(width=4), str(path))
    with pytest.raises(CheckpointError, match=r"shape mismatch: layers.0.weight: model expects \(3, 3\), checkpoint has \(4, 4\)"):
        load_checkpoint(Tiny(), path, _sha(path), TABLE)


def test_failed_load_leaves_the_model_untouched(tmp_path):
    path = tmp_path / "wide.safetensors"
    save_file(_checkpoint(width=4), str(path))
    model = Tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError):
        load_checkpoint(model, path, _sha(path), TABLE)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


def test_rename_rules_must_match_whole_names():
    # "xenc.0.w" contains a rule's pattern but does not fully match it
    with pytest.raises(CheckpointError, match="xenc.0.w"):
        rename_tensors({"xenc.0.w": torch.zeros(1)}, TABLE)


def test_two_names_on_one_target_are_refused():
    table = ((r"a|b", "same"),)
    with pytest.raises(CheckpointError, match="two checkpoint tensors map to 'same'"):
        rename_tensors({"a": torch.zeros(1), "b": torch.zeros(1)}, table)


def test_dtype_follows_the_model():
    model = Tiny().double()
    load_state_strict(model, {f"layers.{i}.{p}": t for (i, p), t in zip(
        [(0, "weight"), (0, "bias"), (1, "weight"), (1, "bias")], _checkpoint().values())})
    assert model.layers[0].weight.dtype == torch.float64


def test_the_shipped_minilm_file_has_the_published_hash():
    assert sha256_of(minilm_dir() / "model.safetensors") == MINILM_SHA256
