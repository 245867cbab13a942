"""Piece words (words.Vocab): every token of the tokenizer copied as content, the split kept."""

from __future__ import annotations

import random
import re

import pytest

from worldserve.training import train as T
from worldserve.training import words

PIECES = words.pieces(["todo", "error", "As", "a", "Ġ", "md", "3x", "ing", ".", "ré", "notes"])


def test_pieces_are_the_word_tokens_of_two_letters_or_more() -> None:
    assert PIECES == ("As", "error", "ing", "md", "notes", "todo")


@pytest.mark.parametrize("split", words.SPLITS)
def test_piece_words_join_pieces_and_keep_to_their_split(split: str) -> None:
    vocab = words.Vocab(random.Random(7), split, PIECES, piece_share=0.9)
    drawn = [vocab.stem() for _ in range(400)]
    joined = [w for w in drawn if re.fullmatch("(?:" + "|".join(PIECES) + ")+", w)]
    assert len(joined) > 100  # most names are piece words at this share
    # a held-out set holds no training piece word, nor a training set a held-out one
    assert all(words.split_of(w) == split for w in joined)
    assert {p for p in PIECES if any(p in w for w in joined)} == set(PIECES)


def test_without_a_share_the_draws_are_those_of_before() -> None:
    plain = words.Vocab(random.Random(11))
    with_pieces = words.Vocab(random.Random(11), "train", PIECES, piece_share=0.0)
    assert [plain.line() for _ in range(200)] == [with_pieces.line() for _ in range(200)]
    assert [plain.file_name() for _ in range(50)] == [with_pieces.file_name() for _ in range(50)]


def test_a_share_needs_pieces_and_a_stage_share_is_a_fraction() -> None:
    with pytest.raises(ValueError, match="needs pieces"):
        words.Vocab(random.Random(1), "train", (), piece_share=0.2)
    with pytest.raises(ValueError, match="not in"):
        T.Stage(episodes=1, minutes=1, piece_share=1.0)
    pieces_stage = T.PROFILES["pieces"].stages[-1]
    assert pieces_stage.piece_share == 0.25
    assert T.PROFILES["pieces"].stages[:-1] == T.PROFILES["batch2"].stages


def test_rare_weights_favour_the_pieces_the_words_carry_least() -> None:
    tokenized = [["Ġ", "ing", "md"], ["Ġ", "ing"], ["Ġ", "ing"]]
    weights = words.rare_weights(PIECES, tokenized)
    by_piece = dict(zip(PIECES, weights, strict=True))
    assert by_piece["todo"] == by_piece["error"] == 1.0  # never carried: the most
    assert by_piece["md"] == pytest.approx(1 / 2 ** 0.5)
    assert by_piece["ing"] == pytest.approx(0.5)  # carried three times: the least


def test_weighted_pieces_are_drawn_as_weighted_and_keep_to_the_split() -> None:
    weights = [0.0 if p == "ing" else 1.0 for p in PIECES]
    vocab = words.Vocab(random.Random(3), "train", PIECES, piece_share=0.9, piece_weights=weights)
    drawn = [vocab.stem() for _ in range(400)]
    joined = [w for w in drawn if re.fullmatch("(?:" + "|".join(PIECES) + ")+", w)]
    assert len(joined) > 100
    assert all(words.split_of(w) == "train" for w in joined)
    # a piece of weight 0 is never drawn (a list word may still hold the letters)
    piece_words = set(joined) - set(words.words("train"))
    assert piece_words and not any("ing" in w for w in piece_words)


def test_piece_weights_must_fit_the_pieces_and_rare_pieces_need_a_share() -> None:
    with pytest.raises(ValueError, match="one non-negative weight per piece"):
        words.Vocab(random.Random(1), "train", PIECES, 0.2, piece_weights=[1.0])
    with pytest.raises(ValueError, match="one non-negative weight per piece"):
        words.Vocab(random.Random(1), "train", PIECES, 0.2, piece_weights=[0.0] * len(PIECES))
    with pytest.raises(ValueError, match="need a piece share"):
        T.Stage(episodes=1, minutes=1, rare_pieces=True)
    rare = T.PROFILES["rare"].stages
    assert rare[:-1] == T.PROFILES["pieces"].stages
    assert rare[-1].rare_pieces and rare[-1].piece_share == 0.35
