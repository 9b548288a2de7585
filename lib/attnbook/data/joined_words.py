"""A length stress test for G2P: several held-out words written together as one long input.

"phone" + "knight" -> source ``"phoneknight"``, target ``F OW N N AY T``: the pronunciation
of each word, in order. The words are drawn from one split (use the test split), so every
piece is unseen in training; only the joining is new. This is how the book checks Bahdanau
et al.'s claim that without attention quality falls as inputs get longer.

Legend: S source length (letters).
"""
from __future__ import annotations

import random
from collections.abc import Sequence

from attnbook.data.g2p import Pronunciation


def join_words(
    pairs: Sequence[tuple[str, Pronunciation]],
    count: int,
    min_words: int = 2,
    max_words: int = 4,
    min_letters: int = 20,
    max_letters: int = 50,
    seed: int = 0,
) -> list[tuple[str, Pronunciation]]:
    """``count`` inputs, each ``min_words``..``max_words`` words from ``pairs`` written together.

    Only joins of ``min_letters``..``max_letters`` letters are kept; drawing is repeated (with
    a private ``random.Random(seed)``) until ``count`` are found, so the result is fixed.
    Returns ``(letters, phonemes)`` pairs, e.g. ``("phoneknight", ("F", "OW", "N", "N", "AY", "T"))``.
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not 1 <= min_words <= max_words:
        raise ValueError(f"need 1 <= min_words <= max_words, got {min_words} and {max_words}")
    if not 1 <= min_letters <= max_letters:
        raise ValueError(f"need 1 <= min_letters <= max_letters, got {min_letters} and {max_letters}")
    if len(pairs) < max_words:
        raise ValueError(f"need at least {max_words} words to join, got {len(pairs)}")
    rng = random.Random(seed)
    out: list[tuple[str, Pronunciation]] = []
    attempts = 0
    while len(out) < count:
        attempts += 1
        if attempts > 1000 * count:
            raise ValueError(
                f"could not find {count} joins of {min_letters}-{max_letters} letters from these words"
            )
        chosen = rng.sample(range(len(pairs)), rng.randint(min_words, max_words))
        letters = "".join(pairs[i][0] for i in chosen)
        if min_letters <= len(letters) <= max_letters:
            out.append((letters, tuple(p for i in chosen for p in pairs[i][1])))
    return out
