"""What a TextArena game reads of an action: bounded, and parsed in linear time."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_envs.textarena.bounded import MAX_GAME_ACTION_CHARS, OfferPattern, game_text

pytest.importorskip("textarena")

# Simple Negotiation's own pattern (textarena 0.7), the reference on short texts.
GAME_PATTERN = re.compile(
    r"\[Offer:?\s*(?:I\s+(?:give|offer)\s+)?([^\[\]]+?)\s*\.*\]", re.IGNORECASE | re.DOTALL
)
PIECES = ["[", "]", "[Offer", "[offer:", ":", " ", "  ", "\n", ".", "I ", "give ", "offer ",
          "3 Wood", " -> ", "2 Ore", "x", "\u00a0"]  # fmt: skip


def _negotiation():
    from llm_envs.textarena.env import TextArenaEnv

    env = TextArenaEnv(game="SimpleNegotiation-v0")
    env.reset(seed=0)
    return env


def _game_parser():
    """Simple Negotiation's own offer parser (textarena's), to compare what both patterns give."""
    import textarena

    game = textarena.make("SimpleNegotiation-v0")
    while hasattr(game, "env"):
        game = game.env
    return game._parse_offer


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=14).map("".join))
def test_the_offer_read_is_the_games_own(text):
    ours, theirs = OfferPattern().search(text), GAME_PATTERN.search(text)
    assert (ours is None) == (theirs is None), text
    if theirs is None:
        return
    mine, game = ours.group(1).strip(), theirs.group(1).strip()
    # Where the game's pattern backtracks to an offer of one blank, dot or colon, or to
    # "I give" alone, ours reads an empty offer: the game parses both to no offer.
    if mine != game:
        assert mine == "" or re.fullmatch(r"I\s+(give|offer)", mine, re.IGNORECASE), (text, mine)
        assert re.fullmatch(r"[:.\s]*", game) or re.fullmatch(
            r"I\s+(give|offer)", game, re.IGNORECASE
        )


def test_the_games_offers_parse_the_same():
    parse = _game_parser()
    for text in ["[Offer: 3 Wood -> 2 Ore]", "[offer I give 1 Sheep -> 1 Brick.]", "[Offer:]"]:
        ours, theirs = OfferPattern().search(text), GAME_PATTERN.search(text)
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert parse(ours.group(1).strip()) == parse(theirs.group(1).strip())
    assert parse("3 Wood -> 2 Ore") is not None  # the comparison compares offers


@pytest.mark.parametrize(
    "action",
    [
        "[Offer:" + " " * 200_000,
        "[Offer: 3" + " " * 200_000 + ".",
        "[Offer" * 50_000 + "]",
        "[Offer: " + "1" * 200_000 + " Wood -> 2 Ore]",
        "[Offer: " + "." * 200_000 + "x]",
    ],
    ids=["spaces", "spaces then dot", "offers", "digits", "dots"],
)
def test_a_hostile_negotiation_step_ends_and_keeps_the_whole_action(action):
    # The game's own pattern took hours at this length (cubic); bench/debate.py --actions and
    # the module docstring have the times. Here: it ends, and the record keeps every character.
    env = _negotiation()
    env.step(action)
    assert env.turns[-1].text == action


def test_a_game_reads_the_first_characters_only():
    text = "[4]" + "x" * (2 * MAX_GAME_ACTION_CHARS)
    assert game_text(text) == text[:MAX_GAME_ACTION_CHARS]
    assert game_text("[4]") == "[4]"
