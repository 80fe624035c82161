"""What a TextArena game reads of an action: bounded, and parsed in linear time."""

from __future__ import annotations

import re
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_envs.textarena.bounded import (
    MAX_GAME_ACTION_CHARS,
    OfferPattern,
    connect_four_column,
    game_text,
)
from tests.parsing.work_meter import WorkMeter

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


# Connect Four's own move pattern (textarena 0.7), searched; the reference on short texts.
COLUMN_PATTERN = re.compile(r".*\[(?:col\s*)?(\d+)\].*", re.IGNORECASE)
COLUMN_PIECES = ["[", "]", "col", "COL", "Col ", " ", "\t", "\n", "\r", "1", "23", "x", "\u0663"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(COLUMN_PIECES), max_size=16).map("".join))
def test_the_column_read_is_the_games_own(text):
    theirs = COLUMN_PATTERN.search(text)
    assert connect_four_column(text) == (theirs.group(1) if theirs else None), text


def _connect_four_work(action: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """Regex steps of one Connect Four step on ``action``, the game's inline pattern included."""
    import textarena.envs.ConnectFour.env as game_module

    from llm_envs.textarena import bounded
    from llm_envs.textarena.env import TextArenaEnv

    env = TextArenaEnv(game="ConnectFour-v0")
    env.reset(seed=0)
    meter = WorkMeter()
    # The game compiles its pattern inline (re.compile(...).search): count what it compiles.
    counting = types.SimpleNamespace(
        compile=lambda *args: meter.counted(re.compile(*args)), IGNORECASE=re.IGNORECASE
    )
    with monkeypatch.context() as patch, meter.measuring(bounded, lines=False):
        patch.setattr(game_module, "re", counting)
        env.step(action)
    return meter.work


@pytest.mark.parametrize("shape", ["[", "[1", "[Deny", "[col "], ids=repr)
def test_a_connect_four_step_is_linear_in_its_action(shape, monkeypatch):
    # Round 4: "[" * 4,096 took 2.4-4 s per step on the game's own pattern (quadratic), each
    # holding the interpreter's lock; here twice the text costs at most about twice the work.
    small, large = (_connect_four_work(shape * n, monkeypatch) for n in (150, 300))
    assert large <= 2.3 * small + 200, (small, large)


def test_a_connect_four_move_is_still_played():
    from llm_envs.textarena.env import TextArenaEnv

    env = TextArenaEnv(game="ConnectFour-v0")
    env.reset(seed=0)
    env.step("I think [col 9] no, [col 3]\n[5]")  # the first line's last move: column 3
    assert not env.turns[-1].invalid
    assert "dropped their disk (X) into column 3." in str(env.observe("agent_1"))
