"""attnbook: the shared library of the book *Attention and the Transformer, rebuilt step by step*.

Every chapter rebuilds an idea inline, then imports the reviewed version from here. The folders
are layers, each importing only from those below it (``tests/test_layering.py`` enforces it):

- ``layers/``: masks, attention (``MultiHeadAttention``, ``KVCache``), scores, positions,
  feed-forward, embeddings, and the encoder / decoder / causal blocks;
- ``models/``: one readable file per model (``rnn``, ``transformer``, ``tagger``, ...);
- ``tasks/``: one module per task with its loss, recipe and evaluation (``g2p``, ``tagging``);
- ``data/`` (datasets, vocabularies, batches) sits beside ``models/``: only tasks join them;
- foundation modules: ``env``, ``train``, ``losses``, ``decoding``, ``schedules``, ``metrics``,
  ``plot``, ``checks``, ``progress``, ``results``; and on top, ``exercises/``.

Developer tooling (the notebook runner, the diagram script) lives outside the package, in the
repository's ``tools/``; the benchmark scripts in ``benchmarks/``.

Shape legend used in every docstring and comment (``chapters/notation.md`` has the full table):
B batch, S source length, T target (or query) length, D model width, H heads,
Dh head width (D / H), F feed-forward width, P cached positions, K beams, L generated length,
V vocabulary size, N patches, C image channels.

Mask convention: boolean tensors, ``True`` = may attend (see ``attnbook.layers.masks``).
"""

__version__ = "0.2.0"
