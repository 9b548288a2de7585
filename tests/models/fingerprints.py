"""Outputs of the book's Transformer models from seeded construction, recorded before library v3
and compared after every refactor (``test_fingerprints.py``): a refactor must keep the weights a
seed draws, the order dropout draws its masks, and every output, bit for bit.

``python tests/models/fingerprints.py`` rewrites ``fixtures/model_outputs.pt`` (only do that when a
change is *meant* to alter the models' numbers, and say so in the commit).
"""
from __future__ import annotations

from pathlib import Path

import torch

FIXTURE = Path(__file__).with_name("fixtures") / "model_outputs.pt"


def _seq2seq_batch():
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([7, 4, 2, 5])
    src = torch.randint(4, 11, (4, 7), generator=g)
    for row, n in enumerate(lengths.tolist()):
        src[row, n:] = 0
    return src, lengths, torch.randint(4, 13, (4, 6), generator=g)


def transformer_outputs(norm_first: bool) -> dict[str, torch.Tensor]:
    from attnbook.decoding import beam_search, greedy_decode
    from attnbook.models.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(11, 13, d_model=32, num_heads=4, d_ff=64, norm_first=norm_first))
    src, lengths, tgt = _seq2seq_batch()
    torch.manual_seed(5)
    train_logits = model.train()(src, lengths, tgt)  # dropout 0.1: the masks' order matters
    model.eval()
    maps = model.attention_maps(src, lengths, tgt)
    return {
        "train_logits": train_logits.detach(), "logits": model(src, lengths, tgt).detach(),
        "encoder_map": maps.encoder[-1], "cross_map": maps.decoder[-1].cross_attn,
        "greedy": torch.tensor(sum(greedy_decode(model, src, lengths, 1, 2, 8), [])),
        "beam": torch.tensor(sum(beam_search(model, src, lengths, 1, 2, 8, beam_size=3), [])),
    }


def gpt_outputs() -> dict[str, torch.Tensor]:
    from attnbook.models.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=19, max_len=16, d_model=32, num_heads=4, d_ff=64, num_layers=2,
                          dropout=0.1)).eval()
    tokens = torch.randint(0, 19, (3, 9), generator=torch.Generator().manual_seed(2))
    logits, maps = model(tokens, need_weights=True)
    first, state = model.start(tokens[:, :5])
    second, _ = model.step(tokens[:, 5], state)
    torch.manual_seed(5)
    return {"logits": logits.detach(), "map": maps[-1], "start": first, "step": second,
            "train_logits": model.train()(tokens).detach()}


def bert_outputs() -> dict[str, torch.Tensor]:
    from attnbook.models import bert

    torch.manual_seed(0)
    sizes = dict(vocab_size=23, num_layers=2, num_heads=4)
    config = bert.BertConfig(d_model=32, d_ff=64, max_len=16, **sizes)
    model = bert.BertForPreTraining(config)
    g = torch.Generator().manual_seed(3)
    ids, segments = torch.randint(0, 23, (3, 10), generator=g), torch.randint(0, 2, (3, 10), generator=g)
    mask = torch.ones(3, 10, dtype=torch.bool)
    mask[1, 7:] = False
    torch.manual_seed(5)
    train_mlm, train_nsp = model.train()(ids, segments, mask)
    model.eval()
    mlm, nsp = model(ids, segments, mask)
    out = model.bert(ids, segments, mask, need_weights=True, all_layers=True)
    return {"train_mlm": train_mlm.detach(), "train_nsp": train_nsp.detach(), "mlm": mlm.detach(),
            "nsp": nsp.detach(), "map": out.attentions[-1], "hidden1": out.hidden_states[1].detach()}


def vit_outputs() -> dict[str, torch.Tensor]:
    from attnbook.models.vit import ViT, ViTConfig

    torch.manual_seed(0)
    model = ViT(ViTConfig(image_size=8, patch_size=2, d_model=32, num_heads=4, num_layers=2, d_ff=64,
                          dropout=0.1))
    images = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(4))
    torch.manual_seed(5)
    train_logits = model.train()(images)
    logits, maps = model.eval()(images, need_weights=True)
    return {"train_logits": train_logits.detach(), "logits": logits.detach(), "map": maps[-1]}


def attention_only_outputs() -> dict[str, torch.Tensor]:
    from attnbook.models.attention_only import AttentionOnly

    torch.manual_seed(0)
    model = AttentionOnly(vocab_size=17, max_len=12, d_model=32, num_heads=2, num_layers=2)
    tokens = torch.randint(0, 17, (2, 12), generator=torch.Generator().manual_seed(6))
    logits, maps = model(tokens, need_weights=True)
    return {"logits": logits.detach(), "map": maps[-1]}


def all_outputs() -> dict[str, dict[str, torch.Tensor]]:
    return {
        "transformer_post": transformer_outputs(False), "transformer_pre": transformer_outputs(True),
        "gpt": gpt_outputs(), "bert": bert_outputs(), "vit": vit_outputs(),
        "attention_only": attention_only_outputs(),
    }


if __name__ == "__main__":
    torch.set_num_threads(1)
    FIXTURE.parent.mkdir(exist_ok=True)
    torch.save({"cpu_capability": torch.backends.cpu.get_cpu_capability(), "outputs": all_outputs()}, FIXTURE)
    print(f"wrote {FIXTURE}")
