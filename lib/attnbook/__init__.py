"""attnbook: the shared library of the book *Attention and the Transformer, rebuilt step by step*.

Every chapter rebuilds an idea inline, then imports the reviewed version from here.

Shape legend used in every docstring and comment:
B batch, S source length, T target (or query) length, D model width, H heads,
Dh head width (D / H), V vocabulary size, N patches.

Mask convention: boolean tensors, ``True`` = may attend (see ``attnbook.layers.masks``).
"""

__version__ = "0.1.0"
