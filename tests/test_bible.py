"""The World English Bible corpus: size, cleaning, labels."""
from collections import Counter

import pytest

from attnbook.data.bible import clean_text, genre_names, load_bible


def test_corpus_size_and_labels():
    verses = load_bible()
    assert len(verses) == 31_095  # 31,102 rows, 7 of which are only a translator's note
    assert verses[0].text == "In the beginning God created the heavens and the earth."
    assert (verses[0].book_name, verses[0].genre, verses[-1].book_name) == ("Genesis", "Law", "Revelation")
    assert set(Counter(v.genre for v in verses)) == set(genre_names())
    assert len({v.book for v in verses}) == 66


def test_no_notes_or_markup_left():
    assert not any("{" in v.text or "}" in v.text or "&" in v.text for v in load_bible())


def test_clean_text():
    assert clean_text('God{After "God," a note} created  the\nheavens. ') == "God created the heavens."
    assert clean_text("{only a note}") == ""
    assert clean_text("&gt; Yahweh is my shepherd:") == "Yahweh is my shepherd:"
    with pytest.raises(ValueError, match="unbalanced braces"):
        clean_text("a { b")
