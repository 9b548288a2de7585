"""attnbook: the shared library of the book *Attention and the Transformer, rebuilt step by step*.

Every chapter rebuilds an idea inline, then imports the reviewed version from here. The package
is in layers, each importing only from those below it. ``tests/test_layering.py`` holds the map
(which group may import which), enforces it, and checks that this list names its groups:

- the foundation, top-level modules that import only each other: ``env``, ``cpu_share``,
  ``progress``, ``checks``, ``metrics``, ``schedules``, ``losses``, ``train``, ``decoding``,
  ``plot``, ``checkpoints``, ``package_data``, ``attention_maps``, ``timing``, ``results``;
- ``layers/``: masks, attention (``MultiHeadAttention``, ``KVCache``), scores, positions,
  norms, rotary, feed-forward, embeddings, patches, the encoder / decoder / causal blocks and
  their stack runner, and the bridges to PyTorch's layers;
- ``models/``: one readable file per model (``rnn``, ``encoder_decoder``, ``transformer``,
  ``bert``, ``gpt``, ...);
- ``data/`` (corpora, tokenisers, vocabularies, batches) sits beside ``models/``: only tasks
  join them;
- ``tasks/``: one module per task with its loss, recipe and evaluation (``g2p``, ``tagging``,
  ``language_modeling``, ...);
- on top, ``exercises/`` (the exercise checkers).

Developer tooling (the notebook runner, the diagram script, the benchmark scripts) lives
outside the package, in the repository.

Shape legend used in every docstring and comment (``chapters/notation.md`` has the full table):
B batch, S source length, T target (or query) length, D model width, H heads,
Dh head width (D / H), F feed-forward width, P cached positions, K beams, L generated length,
V vocabulary size, N patches, C image channels.

Mask convention: boolean tensors, ``True`` = may attend (see ``attnbook.layers.masks``).
"""

__version__ = "0.2.0"
