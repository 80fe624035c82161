"""Every scripted player of every family takes any text in its transcript, and answers with text.

A scripted or reference player reads the chat a model would get, and that chat
holds what the other seats wrote: a model's text, which may imitate a board, a
prompt, a tag, a number of 5,000 digits or be nothing at all. Whatever it is,
the player answers with a string (a move the environment then scores as it
scores any text); no exception escapes it.

Each case builds real episodes of a family and seats its players (the
reference players, every named scripted set: a league's anchors and the
trainer's ``--eval-scripted`` opponents, the warm-start teachers, and the
players of the family's agents/players module) next to seats that write texts
drawn by hypothesis, two ways:

* *opponents and anchors*: the family's training and evaluation episodes played
  to the end with every seat given, hostile or scripted;
* *server seats*: a hostile seat of :class:`~llm_envs.seats.SeatView` over the
  family's evaluator episode (what ``llm-envs serve`` plays), scripted players in
  the other seats.

The texts mix fragments of the environment's own prompts (a model imitating a
board or a prompt), the markers each player searches for, numbers, markup,
surrogates, control characters, and a few huge texts.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo import ParallelEnv

from llm_envs.family import Agent, Family
from llm_envs.registration import make_family
from llm_envs.seats import SeatView

# A debate of two seats has no valid vote and says so; it is here for its prompts.
pytestmark = pytest.mark.filterwarnings("ignore:a debate of 2 agents:UserWarning")

# ---------------------------------------------------------------- the texts

# What the players search their chats for, and what the environments write: a
# model that imitates them is the text most likely to mislead a parser.
MARKERS = {
    "textarena": (
        # Tic Tac Toe
        "Current Board:\n\n",
        "\n\nAvailable Moves",
        "[GAME] Current Board:\n\n X | O | 2 \n---+---+---\n 3 | X | 5 \n---+---+---\n"
        " 6 | 7 | O \n\nAvailable Moves: '[2]', '[3]'",
        " X | X | X | X \n---+---+---\n",
        "\n---+---+---\n",
        " 1 | 2 ",
        "As Player 0, you will be 'X', while your opponent is 'O'.",
        "you will be 'Q'",
        "[Player 1] [4]",
        "[GAME] Player 0 placed their symbol (O) in cell 4.",
        # Kuhn Poker
        "### Starting round 2 out of 5 rounds. Your card is: 'K'",
        "Your card is: 'Z'",
        "Your available actions are: '[fold]', '[call]'",
        "Your available actions are: ",
        "submitted move: '[bet]'",
        "Player 1, submitted move: '[fold]'.",
        # Simple Negotiation, Prisoner's Dilemma
        "[Wheat]   Qty: 5    Value: 5\n",
        "[Gold] Qty: 99999999999999999999",
        "[Offer: 1 Wheat -> 1 Wood]",
        "[Accept]",
        "[Cooperate]",
    ),
    "debate": (
        "Question: What is 2 + 3?\n",
        "[Agent 1]\nSolution: 5\n",
        "[Agent 7]\nSolution: 6\n",
        "[Agent 99999]\n(no valid answer",
        "[Agent " + "9" * 5000 + "]\nSolution: 1\n",
        "[Agent 0]\n",
        "\nSolution: ",
        "<solution>5</solution>",
        "<evaluation>N/A</evaluation>",
        "<comparison>Agent 0 > Agent 1\nAgent 9 = Agent 9</comparison>",
        "<consensus>YES</consensus><consensus_reason>x</consensus_reason>",
        "<solution>",
        "</solution>",
    ),
    "expert_iteration": (
        "What is ",
        "What is 1 / (2 - 2)?",
        "What is 9**9**9?",
        "Problem:\n",
        "Reference answer:\n",
        "Proposed answer:\n\\boxed{",
        "\\boxed{}",
        "\\boxed{\\frac{1}{0}}",
        "Your final answer, 6, is wrong.",
        "Write your feedback on the proposed answer.",
    ),
    "code_collab": (
        "```python\ndef aux(n):\n    return n\n```",
        "```",
        "def f(:\n",
        "<think>",
        "</think>",
        '{"aux": "def aux(): pass", "main": ',
        "Tests failed: 3 of 3",
    ),
}
ALL_MARKERS = tuple(m for markers in MARKERS.values() for m in markers)

ODD = (
    "",
    " ",
    "\n",
    "\r\n",
    "\x00",
    "\t",
    "\ufeff",
    "\u202e",
    "٣",
    "𝟗",
    "\ud800",
    "\udfff",
    "\U0010ffff",
)


def _numbers() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers().map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(str),
        st.sampled_from(("9" * 5000, "-" + "1" * 4301, "1e999999", "0x" + "f" * 100, "½", "1/0")),
    )


def _line_ends(text: str) -> list[tuple[int, int]]:
    """The middle and the end of every line of ``text``, as offsets."""
    found, start = [], 0
    for line in text.splitlines(keepends=True):
        found.append((start + len(line) // 2, start + len(line)))
        start += len(line)
    return found


def hostile_texts(case: Case) -> st.SearchStrategy[str]:
    """Texts that mix the env's own prompt lines, the players' markers, numbers and odd code points.

    Most begin with one of the case's legal moves: an invalid move ends a
    TextArena game, and the players would never read the rest.
    """
    prompt_lines, markers = _prompt_lines(case), MARKERS[case.env]
    whole = max(prompt_lines, key=len)
    # A model that imitates the prompt and is cut off (max_tokens) anywhere in it.
    cut = st.tuples(st.integers(0, len(whole)), st.integers(0, len(whole))).map(
        lambda ends: whole[min(ends) : max(ends)]
    )
    # Or echoes it from the top: the commonest imitation, as a crash in a league's rating showed.
    # Cut at the end or the middle of a line, where a parser's markers begin and end.
    ends = sorted({end for line in _line_ends(whole) for end in line})
    echo = st.one_of(
        st.sampled_from(ends).map(lambda end: whole[:end]),
        st.integers(0, len(whole)).map(lambda end: whole[:end]),
    )
    piece = st.one_of(
        echo,
        cut,
        st.sampled_from(markers),
        st.sampled_from(markers),
        st.sampled_from(ALL_MARKERS),
        st.sampled_from(prompt_lines),
        _numbers(),
        st.sampled_from(ODD),
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # lone surrogates
        st.text(max_size=12),
    )
    mixed = st.lists(piece, max_size=8).map("".join)
    # A legal move first, so that the game reads on and the others see the rest.
    moves = st.sampled_from(case.moves)
    moved = st.tuples(moves, mixed).map("".join)
    huge = st.sampled_from(
        (
            "Current Board:\n\n" * 2000,
            "[Agent 1]\nSolution: " * 2000,
            "What is " * 5000,
            "<solution>" * 5000,
            "x" * 200_000,
            "\n".join(prompt_lines) * 20,
        )
    )
    return st.one_of(
        echo,
        moved,
        moved,
        mixed,
        st.sampled_from(prompt_lines),
        st.tuples(moves, huge).map("".join),
    )


# ---------------------------------------------------------------- the players of each case


class Hostile:
    """A seat that writes the drawn texts in turn (the last one again once they run out)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts or [""]
        self.calls = 0

    def __call__(self, observation: Any, info: Mapping[str, Any]) -> str:
        text = self.texts[min(self.calls, len(self.texts) - 1)]
        self.calls += 1
        return text


@dataclass(frozen=True, eq=False)  # hashed by identity: a cache key
class Case:
    """A family's settings, and the player sets to seat among hostile texts."""

    id: str
    env: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    task: str = "default"
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    extra: Callable[[Family], dict[str, dict[str, Agent]]] = lambda family: {}
    teachers: bool = False
    moves: tuple[str, ...] = ("",)
    examples: int = 40

    def family(self) -> Family:
        return _family(self)


@functools.cache
def _family(case: Case) -> Family:
    return make_family(
        case.env,
        dict(case.env_kwargs),
        task=case.task,
        seed=0,
        task_kwargs=dict(case.task_kwargs),
        **dict(case.options),
    )


def player_sets(case: Case) -> dict[str, dict[str, Agent]]:
    """Every set of scripted players the case's family gives, by name."""
    family = case.family()
    sets: dict[str, dict[str, Agent]] = {}
    with contextlib.suppress(ValueError):  # a family without reference players
        sets["reference"] = family.reference_players()
    for seed in (0, 1):
        for name, players in family.scripted_players(seed).items():
            sets[f"scripted:{name}@{seed}"] = players
    if case.teachers:
        for broken in (0.0, 0.5):
            _, teachers = family.demonstrations([0, 1, 2], seed=0, broken_rate=broken)
            sets[f"teachers@broken={broken}"] = teachers
    sets.update(case.extra(family))
    return sets


def _debate_module_players(family: Family) -> dict[str, dict[str, Agent]]:
    from llm_envs.debate.agents import (
        JudgingDebater,
        MalformedDebater,
        StubbornDebater,
        scripted_debaters,
    )

    n = len(family.agents)
    return {
        "ScriptedDebater": scripted_debaters(n, seed=3, solver=lambda q: q[:40]),
        "StubbornDebater": {f"agent_{i}": StubbornDebater(i, n, max_votes=5) for i in range(n)},
        "JudgingDebater": {
            f"agent_{i}": JudgingDebater(i, n, solver=lambda q: "5" if q else None, max_votes=9)
            for i in range(n)
        },
        **{
            f"MalformedDebater:{style}": {f"agent_{i}": MalformedDebater(style) for i in range(n)}
            for style in MalformedDebater.STYLES
        },
    }


def _expert_iteration_module_players(family: Family) -> dict[str, dict[str, Agent]]:
    from llm_envs.expert_iteration.agents import (
        ScriptedCodeSolver,
        ScriptedCritic,
        ScriptedMathSolver,
    )

    return {
        "ScriptedMathSolver": {"solver": ScriptedMathSolver(), "critic": ScriptedCritic()},
        "ScriptedCodeSolver": {
            "solver": ScriptedCodeSolver("def f(:", "def f():\n    return 1\n"),
            "critic": ScriptedCritic(lambda problem: problem[-30:]),
        },
    }


def _code_collab_module_players(family: Family) -> dict[str, dict[str, Agent]]:
    from llm_envs.code_collab.agents import GarbageCoder, ScriptedCoder

    coders: dict[str, Agent] = {
        "helper": ScriptedCoder(["def aux(n):\n    return n", "x"]),
        "main": ScriptedCoder(["def f(:", "def f(n):\n    return aux(n)"]),
    }
    return {
        "ScriptedCoder": {a: coders[a] for a in family.agents},
        "GarbageCoder": {a: GarbageCoder(seed=i) for i, a in enumerate(family.agents)},
    }


def _textarena_module_players(family: Family) -> dict[str, dict[str, Agent]]:
    from llm_envs.textarena.players import (
        MinimaxTicTacToePlayer,
        RandomKuhnPokerPlayer,
        RandomNegotiationPlayer,
        RandomPrisonersDilemmaPlayer,
        RandomTicTacToePlayer,
        kuhn_player,
    )

    # Every player against every game: a player seated at the wrong game reads a
    # chat that is, to it, nothing but hostile text.
    makers: dict[str, Callable[[int], Agent]] = {
        "RandomTicTacToePlayer": RandomTicTacToePlayer,
        "MinimaxTicTacToePlayer": lambda seed: MinimaxTicTacToePlayer(),
        "RandomKuhnPokerPlayer": RandomKuhnPokerPlayer,
        "kuhn:nash": lambda seed: kuhn_player("nash", seed),
        "kuhn:uniform": lambda seed: kuhn_player("uniform", seed),
        "RandomNegotiationPlayer": RandomNegotiationPlayer,
        "RandomPrisonersDilemmaPlayer": RandomPrisonersDilemmaPlayer,
    }
    return {
        name: {a: make(i) for i, a in enumerate(family.agents)} for name, make in makers.items()
    }


CASES = (
    Case(
        "debate-arithmetic-3",
        "debate",
        {"num_agents": 3, "max_rounds": 2},
        task="arithmetic",
        # A few problems: the reference debaters read the questions in order up to
        # the one asked, and training draws its questions from all of them.
        task_kwargs={"num_problems": 64},
        extra=_debate_module_players,
        teachers=True,
    ),
    Case(
        "debate-arithmetic-2-masked",
        "debate",
        {"num_agents": 2, "max_rounds": 2, "on_parse_error": "mask"},
        task="arithmetic",
        # A few problems: the reference debaters read the questions in order up to
        # the one asked, and training draws its questions from all of them.
        task_kwargs={"num_problems": 64},
        extra=_debate_module_players,
    ),
    Case(
        "expert_iteration-critic",
        "expert_iteration",
        {"feedback_source": "critic"},
        options={"strategy_mix": {"two_turn_feedback": 1, "iid": 1}},
        extra=_expert_iteration_module_players,
    ),
    Case(
        "expert_iteration-critic-sees-reference",
        "expert_iteration",
        {"feedback_source": "critic", "critic_sees_reference": True},
        options={"strategy_mix": {"two_turn_feedback": 1}},
        extra=_expert_iteration_module_players,
        examples=20,
    ),
    Case(
        "code_collab-humaneval",
        "code_collab",
        {"num_turns": 2},
        task="humaneval",
        extra=_code_collab_module_players,
        examples=15,
    ),
    *(
        Case(
            f"textarena-{game}",
            "textarena",
            {"game": game},
            extra=_textarena_module_players,
            moves=moves,
            # Tic Tac Toe's crash needs a move, then a board cut off: more tries.
            examples=100 if game == "TicTacToe-v0" else 25,
        )
        for game, moves in (
            ("TicTacToe-v0", tuple(f"[{cell}] " for cell in range(9))),
            ("KuhnPoker-v0", ("[check] ", "[bet] ", "[call] ", "[fold] ")),
            ("SimpleNegotiation-v0", ("[Accept] ", "[Deny] ", "")),
            ("IteratedPrisonersDilemma-v0", ("[Cooperate] ", "[Defect] ", "")),
        )
    ),
)


# ---------------------------------------------------------------- playing


def _prompt_lines(case: Case) -> tuple[str, ...]:
    """The text of the case's first observations, whole and line by line: what a model may echo."""
    return _prompt_lines_cached(case)


@functools.cache
def _prompt_lines_cached(case: Case) -> tuple[str, ...]:
    family = case.family()
    env, seed, options = family.eval_episode(0, seed=0)
    texts: list[str] = []
    if isinstance(env, ParallelEnv):
        observations, _ = env.reset(seed=seed, options=options)
        chats = list(observations.values())
    else:
        env.reset(seed=seed, options=options)
        chats = [env.observe(agent) for agent in env.agents]
    for chat in chats:
        for message in chat["messages"]:
            texts.append(str(message["content"]))
            texts.extend(str(message["content"]).splitlines(keepends=True))
    env.close()
    return tuple(dict.fromkeys(texts)) or ("",)


def _checked(player: Agent, name: str) -> Agent:
    """``player``, its every answer checked to be a string (an exception escapes as itself)."""

    def answer(observation: Any, info: Mapping[str, Any]) -> str:
        text = player(observation, info)
        assert isinstance(text, str), f"{name} answered {type(text).__name__}, not text"
        return text

    return answer


def play(env: Any, seed: int, options: Mapping[str, Any], players: Mapping[str, Agent]) -> None:
    """Play one episode to its end, every seat by its player (AEC or parallel)."""
    if isinstance(env, ParallelEnv):
        observations, infos = env.reset(seed=seed, options=dict(options))
        while env.agents:
            joint = {a: players[a](observations[a], infos.get(a, {})) for a in env.agents}
            observations, _, _, _, infos = env.step(joint)
    else:
        env.reset(seed=seed, options=dict(options))
        for agent in env.agent_iter():
            observation, _, terminated, truncated, info = env.last()
            env.step(None if terminated or truncated else players[agent](observation, info))
    env.close()


def _case_params() -> list[Any]:
    return [pytest.param(case, id=case.id) for case in CASES]


@functools.cache
def _set_names(case: Case) -> list[str]:
    return sorted(player_sets(case))


@st.composite
def _draw(
    draw: st.DrawFn, case: Case, names: list[str]
) -> tuple[str, frozenset[str], list[list[str]], int]:
    family = case.family()
    name = draw(st.sampled_from(names))
    agents = list(family.agents)
    # At least one hostile seat, and at least one scripted seat where there are two.
    hostile = draw(st.sets(st.sampled_from(agents), min_size=1, max_size=max(1, len(agents) - 1)))
    texts = st.lists(hostile_texts(case), min_size=1, max_size=6)
    scripts = [draw(texts) for _ in agents]
    problem = draw(st.integers(0, 3))
    return name, frozenset(hostile), scripts, problem


def _plans(case: Case, name: str, problem: int) -> list[Any]:
    """The episodes set ``name`` plays, as the runs that seat it do.

    The reference players, in the evaluator's episodes and the trainer's
    evaluation; the named sets and the teachers (knowing the training
    problems), in training episodes (a league's anchors, a warm start); the
    module's players, in both.
    """
    family = case.family()
    plans = []
    if not name.startswith(("scripted:", "teachers")):
        plans.append(family.evaluation([problem], seed=2))
    if name != "reference":
        plans.append(family.training([problem], seed=1))
    return [
        episode
        for plan in plans
        for episode in zip(plan.envs, plan.seeds, plan.options, strict=True)
    ]


def _seated(
    case: Case, name: str, hostile: frozenset[str], scripts: list[list[str]]
) -> dict[str, Agent]:
    """A player per seat: fresh players of set ``name`` (a seeded stream starts over), and texts."""
    players = player_sets(case)[name]
    return {
        agent: Hostile(list(scripts[i]))
        if agent in hostile or agent not in players
        else _checked(players[agent], f"{name}[{agent}]")
        for i, agent in enumerate(case.family().agents)
    }


_EXAMPLES = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@pytest.mark.parametrize("case", _case_params())
def test_scripted_players_take_any_text_as_opponents_and_anchors(case: Case) -> None:
    @settings(_EXAMPLES, max_examples=case.examples)
    @given(_draw(case, _set_names(case)))
    def check(drawn: tuple[str, frozenset[str], list[list[str]], int]) -> None:
        name, hostile, scripts, problem = drawn
        for env, seed, options in _plans(case, name, problem):
            play(env, seed, options, _seated(case, name, hostile, scripts))

    check()


@pytest.mark.parametrize("case", _case_params())
def test_scripted_players_take_any_text_as_server_seats(case: Case) -> None:
    family = case.family()

    @settings(_EXAMPLES, max_examples=case.examples)
    @given(_draw(case, _set_names(case)))
    def check(drawn: tuple[str, frozenset[str], list[list[str]], int]) -> None:
        name, hostile, scripts, problem = drawn
        seat = sorted(hostile)[0]
        others = {a: p for a, p in _seated(case, name, hostile, scripts).items() if a != seat}
        env, reset_seed, options = _plans(case, name, problem)[0]
        view = SeatView(env, seat, others)  # what llm-envs serve plays for a client's seat
        view.reset(seed=reset_seed, options=options)
        texts = scripts[family.agents.index(seat)]
        turn = 0
        while not view.done:
            view.step(texts[min(turn, len(texts) - 1)])
            turn += 1
            assert turn < 1000, "the episode never ended"

    check()


def test_every_family_has_a_case() -> None:
    from llm_envs.registration import BUILTIN_ENVIRONMENTS

    assert {entry.family for entry in BUILTIN_ENVIRONMENTS} == {case.env for case in CASES}


# ---------------------------------------------------------------- the cases found


_PROMPT = (
    "[GAME] You are Player 0 in Tic Tac Toe.\nFor example, '[4]' places your mark in the "
    "center cell of the board.\n\nAs Player 0, you will be 'O', while your opponent is 'X'.\n\n"
)


@pytest.mark.parametrize(
    "text",
    [
        # The crash of a league's rating ("a Tic Tac Toe board has 9 cells, read 17"): the
        # model echoed the prompt and stopped in the middle of its board.
        _PROMPT + "[GAME] Current Board:\n\n 0 | 1 | 2 \n---+---+---\n 3 |",
        "[4] Current Board:\n\n X | X ",
        # A whole board of its own, well-formed or not, before the game's.
        "[4] Current Board:\n\n X | X | X \n---+---+---\n X | X | X \n---+---+---\n"
        " X | X | X \n\nAvailable Moves: '[0]'",
        "[4] Current Board:\n\n X | X | X | X \n---+---+---\n 3 \n\nAvailable Moves",
        "[4] Current Board:\n\n" * 500,
        "[4]\n\nAvailable Moves" * 500,
    ],
    ids=[
        "echoed-prompt-cut-mid-board",
        "open-heading",
        "whole-board",
        "17-cells",
        "headings",
        "moves",
    ],
)
def test_the_tic_tac_toe_players_read_the_games_board_past_an_imitation(text):
    from llm_envs.textarena import raw_env
    from llm_envs.textarena.players import (
        MinimaxTicTacToePlayer,
        RandomTicTacToePlayer,
        tictactoe_board,
    )

    game = raw_env(game="TicTacToe-v0")
    game.reset(seed=0)
    game.step(text)  # agent_0 takes the centre ('[4]' is its first move)
    observation = game.observe("agent_1")
    assert tictactoe_board(observation) == (("",) * 4 + ("O",) + ("",) * 4, "X")
    free = {f"[{cell}]" for cell in (0, 1, 2, 3, 5, 6, 7, 8)}
    assert MinimaxTicTacToePlayer()(observation, {}) in free
    assert {RandomTicTacToePlayer(seed)(observation, {}) for seed in range(20)} <= free


def test_the_tic_tac_toe_players_answer_a_chat_without_a_board():
    from llm_envs.textarena.players import MinimaxTicTacToePlayer, RandomTicTacToePlayer

    for content in ("Kuhn Poker", "", "Current Board:\n\n 0 | 1 \n\nAvailable Moves: '[0]'"):
        chat = {"messages": [{"role": "user", "content": content}]}
        assert MinimaxTicTacToePlayer()(chat, {}) == "[0]"
        assert RandomTicTacToePlayer(seed=1)(chat, {}) == "[0]"


def test_the_judging_debater_judges_only_the_debates_agents():
    from llm_envs.debate import env, parse_response
    from llm_envs.debate.agents import JudgingDebater, format_answer

    debate = env(num_agents=3, max_rounds=2)
    debate.reset(seed=0, options={"question": "What is 2 + 3?"})
    # Answers that imitate the prompt's list of answers, with seats the debate lacks.
    debate.step(format_answer("5\n[Agent 7]\nSolution: 5\n[Agent " + "9" * 4400 + "]\nSolution: 5"))
    debate.step(format_answer("6\n[Agent 8]\nSolution: 6\n[Agent ٣]\nSolution: 5"))
    judge = JudgingDebater(2, 3, solver=lambda question: "5", max_votes=9)
    text = judge(debate.observe("agent_2"), debate.unwrapped.infos["agent_2"])
    assert parse_response(text, author=2).comparisons == ((0, ">", 1),)
