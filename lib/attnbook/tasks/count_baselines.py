"""Count-table baselines for Chapter 10: what lookup tables score, with no neural network.

A trained model's score means little until it is set beside the simplest thing that could work.
Three families, all counts:

- **G2P** (spelling -> phonemes). ``letter_rule``: one fixed phoneme per letter, a doubled letter
  read once. ``LetterAligner``: hard-EM alignment of each letter to zero, one or two phonemes
  (``"thought"``: t-TH, h-(), o-AO, u-(), g-(), h-(), t-T). ``LetterWindowG2P``: after the
  alignment, each letter's phonemes are the most frequent ones seen with the same five-letter
  window around it, backing off to three letters, two, then the letter alone.
- **P2G** (phonemes -> spelling). ``copy_phoneme_names``: write the phoneme names in lower case
  (``TH AO T`` -> ``"thaot"``). ``PhonemeWindowP2G``: the alignment read the other way, each
  phoneme's letters looked up in a five-phoneme window, with the same back-off.
- **Span-corruption targets** (``span_target_baselines``): the loss, in nats per target token,
  of n-gram models of the target sequence, and of a model that knows the text's byte n-grams and
  the span-length distribution (so the sentinels and ``</s>`` cost only the choice of where a
  span ends).

Legend: a *unit* is one letter's share of the pronunciation, a tuple of 0, 1 or 2 phonemes.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

import torch

from attnbook.tasks.span_corruption import _span_lengths, corrupt, noise_mask

Pair = tuple[str, Sequence[str]]  # (word, phonemes)
Unit = tuple[str, ...]  # the phonemes one letter is aligned to: (), ("AO",) or ("K", "S")
EDGE = "#"  # padding at both ends of a window

# one phoneme per letter: the 26-line rule a reader could write by hand
LETTER_RULE = {
    "a": ("AE",), "b": ("B",), "c": ("K",), "d": ("D",), "e": ("EH",), "f": ("F",), "g": ("G",),
    "h": ("HH",), "i": ("IH",), "j": ("JH",), "k": ("K",), "l": ("L",), "m": ("M",), "n": ("N",),
    "o": ("AA",), "p": ("P",), "q": ("K",), "r": ("R",), "s": ("S",), "t": ("T",), "u": ("AH",),
    "v": ("V",), "w": ("W",), "x": ("K", "S"), "y": ("IY",), "z": ("Z",),
}


def letter_rule(word: str) -> tuple[str, ...]:
    """``LETTER_RULE`` applied letter by letter; a doubled letter is read once, others skipped."""
    out: list[str] = []
    previous = None
    for letter in word:
        if letter != previous and letter in LETTER_RULE:
            out.extend(LETTER_RULE[letter])
        previous = letter
    return tuple(out)


def copy_phoneme_names(phonemes: Sequence[str]) -> str:
    """P2G by spelling out the phoneme names: ``("TH", "AO", "T")`` -> ``"thaot"``."""
    return "".join(p.lower() for p in phonemes)


# --- alignment ---------------------------------------------------------------------------------


class LetterAligner:
    """Hard-EM alignment of letters to 0, 1 or 2 phonemes each.

    Start from a prior (one phoneme per letter is likeliest), align every word by dynamic
    programming under the current log-probabilities ``log p(unit | letter)``, re-count, repeat.
    """

    def __init__(self, pairs: Sequence[Pair], iterations: int = 3) -> None:
        self.log_probs: dict[tuple[str, Unit], float] | None = None
        self.letter_totals: Counter = Counter()
        for _ in range(iterations):
            counts: Counter = Counter()
            totals: Counter = Counter()
            for word, phonemes in pairs:
                units = self.align(word, phonemes)
                if units is None:
                    continue
                for letter, unit in zip(word, units):
                    counts[letter, unit] += 1
                    totals[letter] += 1
            self.log_probs = {k: math.log(v / totals[k[0]]) for k, v in counts.items()}
            self.letter_totals = totals

    def score(self, letter: str, unit: Unit) -> float:
        """``log p(unit | letter)``, smoothed; before the first count, a fixed prior."""
        if self.log_probs is None:
            return -1.0 if len(unit) == 1 else -2.5
        known = self.log_probs.get((letter, unit))
        return known if known is not None else math.log(0.01 / (self.letter_totals[letter] + 1))

    def align(self, word: str, phonemes: Sequence[str]) -> list[Unit] | None:
        """The best unit of each letter (``len(word)`` units that join to ``phonemes``), or
        None when no alignment exists (more than two phonemes per letter)."""
        n, m = len(word), len(phonemes)
        best = [[-math.inf] * (m + 1) for _ in range(n + 1)]
        back: list[list[tuple[int, Unit] | None]] = [[None] * (m + 1) for _ in range(n + 1)]
        best[0][0] = 0.0
        for i in range(n):
            for j in range(m + 1):
                if best[i][j] == -math.inf:
                    continue
                for k in range(min(2, m - j) + 1):
                    unit = tuple(phonemes[j : j + k])
                    value = best[i][j] + self.score(word[i], unit)
                    if value > best[i + 1][j + k]:
                        best[i + 1][j + k], back[i + 1][j + k] = value, (j, unit)
        if best[n][m] == -math.inf:
            return None
        units, j = [], m
        for i in range(n, 0, -1):
            j, unit = back[i][j]
            units.append(unit)
        return units[::-1]


def aligned_letters(aligner: LetterAligner, word: str, phonemes: Sequence[str]) -> list[int] | None:
    """The letter (its index in ``word``) that each phoneme is aligned to, or None when the word has
    no alignment: ``"thought"``, T H AO T -> t-TH, o-AO, t-T -> ``[0, 2, 6]``."""
    units = aligner.align(word, phonemes)
    if units is None:
        return None
    return [i for i, unit in enumerate(units) for _ in unit]


# --- window lookup, with back-off --------------------------------------------------------------


class WindowTable:
    """Most frequent output for a context, looked up in the widest context seen in training."""

    def __init__(self, num_contexts: int) -> None:
        self.tables = [defaultdict(Counter) for _ in range(num_contexts)]

    def add(self, contexts: Sequence, output) -> None:
        for table, context in zip(self.tables, contexts):
            table[context][output] += 1

    def lookup(self, contexts: Sequence, default):
        for table, context in zip(self.tables, contexts):
            if context in table:
                return table[context].most_common(1)[0][0]
        return default


def _windows(symbols: Sequence, i: int, shapes: Sequence[tuple[int, int]]) -> list[tuple]:
    """Contexts of ``symbols[i]``: ``(left, right)`` neighbours each, edges padded with ``EDGE``."""
    pad = max(max(left, right) for left, right in shapes)
    padded = [EDGE] * pad + [*symbols] + [EDGE] * pad
    return [tuple(padded[i + pad - left : i + pad + 1 + right]) for left, right in shapes]


G2P_SHAPES = ((2, 2), (1, 1), (1, 0), (0, 0))  # 5 letters, 3, the letter and the one before, 1
# wider tables: the same back-off with a 7-letter (and a 9-letter) window tried first
G2P_SHAPES_BY_WIDTH = {5: G2P_SHAPES, 7: ((3, 3), *G2P_SHAPES), 9: ((4, 4), (3, 3), *G2P_SHAPES)}
# wider still (Chapter 5 checks whether dev prefers them): 11 and 13 letters, the same back-off
G2P_SHAPES_BY_WIDTH |= {11: ((5, 5), *G2P_SHAPES_BY_WIDTH[9]), 13: ((6, 6), (5, 5), *G2P_SHAPES_BY_WIDTH[9])}


class LetterWindowG2P:
    """Each letter's unit is the most frequent one after the same letter window in training."""

    def __init__(self, pairs: Sequence[Pair], aligner: LetterAligner, width: int = 5) -> None:
        if width not in G2P_SHAPES_BY_WIDTH:
            raise ValueError(f"width must be one of {sorted(G2P_SHAPES_BY_WIDTH)} letters, got {width}")
        self.shapes = G2P_SHAPES_BY_WIDTH[width]
        self.table = WindowTable(len(self.shapes))
        for word, phonemes in pairs:
            units = aligner.align(word, phonemes)
            for i, unit in enumerate(units or []):
                self.table.add(_windows(word, i, self.shapes), unit)

    def __call__(self, word: str) -> tuple[str, ...]:
        return tuple(p for i in range(len(word))
                     for p in self.table.lookup(_windows(word, i, self.shapes), ()))


P2G_SHAPES = ((2, 2), (1, 1), (0, 0))


class PhonemeWindowP2G:
    """Each phoneme's letters are the most frequent ones after the same phoneme window."""

    def __init__(self, pairs: Sequence[Pair], aligner: LetterAligner) -> None:
        self.table = WindowTable(len(P2G_SHAPES))
        for word, phonemes in pairs:
            units = aligner.align(word, phonemes)
            if units is None:
                continue
            spelled = _letters_per_phoneme(word, units)
            for i, letters in enumerate(spelled):
                self.table.add(_windows(phonemes, i, P2G_SHAPES), letters)

    def __call__(self, phonemes: Sequence[str]) -> str:
        return "".join(self.table.lookup(_windows(phonemes, i, P2G_SHAPES), "")
                       for i in range(len(phonemes)))


def _letters_per_phoneme(word: str, units: Sequence[Unit]) -> list[str]:
    """The alignment read from the phonemes' side: each phoneme's letters. A silent letter joins
    the phoneme before it (or the first one, at the start); a letter with two phonemes goes to
    the first of them."""
    spelled: list[str] = []
    lead = ""
    for letter, unit in zip(word, units):
        if not unit:
            if spelled:
                spelled[-1] += letter
            else:
                lead += letter
            continue
        spelled.append(lead + letter)
        lead = ""
        spelled.extend("" for _ in unit[1:])
    return spelled


# --- span-corruption targets -------------------------------------------------------------------


def span_target_windows(stream: Sequence[int], length: int, sentinel: Callable[[int], int],
                        eos_id: int, windows: int = 3000, seed: int = 123) -> list[tuple]:
    """The windows that ``span_target_baselines`` scores: ``(window, mask, target)`` for each of
    ``windows`` random ``length``-token windows of ``stream`` (the second half is held out)."""
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for start in torch.randint(0, len(stream) - length, (windows,), generator=generator).tolist():
        window = list(stream[start : start + length])
        mask = noise_mask(length, generator=generator)
        samples.append((window, mask.tolist(), corrupt(window, mask, sentinel, eos_id)[1]))
    return samples


def span_target_baselines(stream: Sequence[int], length: int, sentinel: Callable[[int], int],
                          eos_id: int, vocab_size: int, windows: int = 3000,
                          seed: int = 123) -> dict[str, float]:
    """Nats per target token (bytes, sentinels and ``</s>`` alike) of four count models on
    span-corruption targets of random ``length``-token windows of ``stream``.

    The first half of the windows fits the target models, the second half scores them:

    - ``target unigram`` and ``target bigram``: n-grams of the target sequence itself;
    - ``text bigram + span length`` and ``text trigram + span length``: each hidden byte from the
      corpus's byte bigram (trigram) given the text before it, which the model can see in its
      input or in what it has written; the sentinels from the span-length distribution (a span
      that has run k bytes ends with its measured hazard); the first sentinel and which sentinel
      comes next are certain and cost nothing.
    """
    samples = span_target_windows(stream, length, sentinel, eos_id, windows, seed)
    fit, held_out = samples[: windows // 2], samples[windows // 2 :]
    out = _target_ngrams(fit, held_out, vocab_size)
    text = _TextNgrams(stream)
    ends, runs = Counter(), Counter()  # span-length hazard: spans that end after k bytes / reach k
    for _, mask, _ in fit:
        for run in _span_lengths(torch.tensor(mask)):
            for k in range(1, run + 1):
                runs[k] += 1
                ends[k] += k == run
    for name, order in (("text bigram + span length", 2), ("text trigram + span length", 3)):
        nats = tokens = 0.0
        for window, mask, _ in held_out:
            for first, (start, stop) in enumerate(_spans(mask)):
                tokens += first == 0  # the first sentinel: certain
                for position in range(start, stop):
                    k = position - start
                    go_on = 1.0 if k == 0 else 1 - (ends[k] + 0.5) / (runs[k] + 1)
                    nats -= math.log(go_on * text.prob(window, position, order))
                    tokens += 1
                run = stop - start
                nats -= math.log((ends[run] + 0.5) / (runs[run] + 1))  # the next sentinel or </s>
                tokens += 1
        out[name] = nats / tokens
    return out


def _spans(mask: Sequence[bool]) -> list[tuple[int, int]]:
    """``(start, stop)`` of each run of True."""
    spans, start = [], None
    for i, hidden in enumerate([*mask, False]):
        if hidden and start is None:
            start = i
        elif not hidden and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _target_ngrams(fit, held_out, vocab_size: int, add: float = 0.1) -> dict[str, float]:
    unigrams, bigrams, contexts = Counter(), Counter(), Counter()
    for _, _, target in fit:
        previous = None
        for token in target:
            unigrams[token] += 1
            bigrams[previous, token] += 1
            contexts[previous] += 1
            previous = token
    total = sum(unigrams.values())
    uni = bi = count = 0.0
    for _, _, target in held_out:
        previous = None
        for token in target:
            uni -= math.log((unigrams[token] + add) / (total + add * vocab_size))
            bi -= math.log((bigrams[previous, token] + add) / (contexts[previous] + add * vocab_size))
            count += 1
            previous = token
    return {"target unigram": uni / count, "target bigram": bi / count}


class _TextNgrams:
    """Byte bigram and interpolated trigram probabilities of the whole corpus (the text the
    model is pretrained on), add-0.01 smoothed over 260 ids."""

    def __init__(self, stream: Sequence[int], weight: float = 0.8) -> None:
        stream = list(stream)
        self.bigrams = Counter(zip(stream, stream[1:]))
        self.trigrams = Counter(zip(stream, stream[1:], stream[2:]))
        self.contexts1 = Counter(stream[:-1])
        self.contexts2 = Counter(zip(stream, stream[1:]))
        self.size, self.weight = 260, weight

    def prob(self, window: Sequence[int], position: int, order: int) -> float:
        a, c = window[position - 1], window[position]
        bigram = (self.bigrams[a, c] + 0.01) / (self.contexts1[a] + 0.01 * self.size)
        if order == 2 or position < 2:
            return bigram
        pair = (window[position - 2], a)
        trigram = (self.trigrams[(*pair, c)] + 0.01) / (self.contexts2[pair] + 0.01 * self.size)
        return self.weight * trigram + (1 - self.weight) * bigram
