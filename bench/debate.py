"""Benchmark the debate environment and the pairwise reward functions.

Measures agent-turns per second of the debate env with pre-written scripted
answers (parse + prompt + step: everything the env adds to a rollout), in
both observation modes, side by side with the cost of parsing the same answers
alone (the baseline: the work no environment can avoid), with and without
shuffled labels (and against the number of agents), and the reward functions
on large vote lists.

Then one hostile (or merely long) action of 10k, 100k and 1M characters: the
seconds of ``env.step`` and of every prompt after it (with shuffled labels,
each answer is relabelled for each reader), per character (flat when linear),
side by side with the parser the step used before issue 45
(``tests/parsing/reference_parsers.py``: its comparison parser and label
rename), where that is affordable (10k to 40k characters: it is quadratic).

    python bench/debate.py              # everything
    python bench/debate.py --actions    # the long actions only
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from llm_envs.debate import DebateEnv, format_answer, parse_response
from llm_envs.debate import labels as debate_labels
from llm_envs.debate import protocol as debate_protocol
from llm_envs.debate.protocol import format_response
from llm_envs.debate.rewards import Vote, win_minus_loss, win_rate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the old parsers, in tests/
from tests.parsing import reference_parsers as before


def scripted_answers(num_agents: int, count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    answers = []
    for _ in range(count):
        a, b = rng.sample(range(num_agents), 2)
        comparisons = [f"Agent {a} > Agent {b}", f"Agent {b} = Agent {(b + 1) % num_agents}"]
        solution = "The answer is 391 because 17 * 23 = 17 * 20 + 17 * 3 = 340 + 51. " * 4
        answers.append(
            format_answer(solution, "Agent 1 made an arithmetic slip. " * 3, comparisons)
        )
    return answers


def time_env(
    mode: str, num_agents: int, max_rounds: int, episodes: int, shuffle_labels: bool = False
) -> tuple[float, int]:
    debate = DebateEnv(
        num_agents=num_agents,
        max_rounds=max_rounds,
        observation_mode=mode,
        shuffle_labels=shuffle_labels,
    )
    answers = scripted_answers(num_agents, 997)
    turns = 0
    start = time.perf_counter()
    for episode in range(episodes):
        debate.reset(seed=episode)
        for _agent in debate.agent_iter():
            _, _, term, trunc, _ = debate.last()
            if term or trunc:
                debate.step(None)
                continue
            debate.step(answers[turns % len(answers)])
            turns += 1
    return time.perf_counter() - start, turns


def time_parse_only(num_agents: int, turns: int) -> float:
    answers = scripted_answers(num_agents, 997)
    start = time.perf_counter()
    for t in range(turns):
        parse_response(answers[t % len(answers)], t % num_agents)
    return time.perf_counter() - start


# One action's comparison line, or a whole answer: the shapes that were quadratic
# (a run of emphasis, "Agent 1" then a run) and two normal answers padded to size.
ACTION_SHAPES = {
    "stars": lambda size: format_response(solution="4", comparison="*" * size),
    "underscores": lambda size: format_response(solution="4", comparison="_" * size),
    "backticks": lambda size: format_response(solution="4", comparison="`" * size),
    "agent+stars": lambda size: format_response(solution="4", comparison="Agent 1" + "*" * size),
    "votes": lambda size: format_response(
        solution="4", comparison=("Agent 0 > Agent 2\n" * (size // 18 + 1))[:size]
    ),
    "long answer": lambda size: format_answer(
        ("The answer is 391 because 17 * 23 = 17 * 20 + 17 * 3 = 340 + 51. " * (size // 64 + 1))[
            :size
        ],
        "Agent 1 made an arithmetic slip.",
        ["Agent 0 > Agent 1", "Agent 1 = Agent 2"],
    ),
}


def time_action(action: str) -> tuple[float, float]:
    """Seconds of one env.step on ``action``, and of every prompt after it (shuffled labels)."""
    debate = DebateEnv(num_agents=3, max_rounds=2, shuffle_labels=True)
    debate.reset(seed=0)
    start = time.perf_counter()
    debate.step(action)
    step = time.perf_counter() - start
    start = time.perf_counter()
    for agent in debate.possible_agents:
        debate.observe(agent)
    return step, time.perf_counter() - start


class _Now:
    parse_comparisons = staticmethod(debate_protocol.parse_comparisons)
    relabel_mentions = staticmethod(debate_labels.relabel_mentions)


labels_and_protocol = _Now()


def time_parsers(action: str, parsers: object) -> tuple[float, float]:
    """Seconds of the comparison parser and of two readers' relabels, by ``parsers``' functions."""
    comparison = parse_response(action, 0).comparison_text
    start = time.perf_counter()
    parsers.parse_comparisons(comparison, 0)  # type: ignore[attr-defined]
    parse = time.perf_counter() - start
    start = time.perf_counter()
    for rename in ([1, 0, 2], [2, 1, 0]):
        parsers.relabel_mentions(action, rename)  # type: ignore[attr-defined]
    return parse, time.perf_counter() - start


def actions() -> None:
    print(
        "\none action of N characters (3 agents, shuffled labels): the step and every prompt"
        "\nafter it (s, ns per character), and the two parsers on it, now and before issue 45"
    )
    print(
        f"{'shape':>12} {'chars':>9} | {'step s':>7} {'ns/ch':>5} {'prompts s':>9} {'ns/ch':>5}"
        f" | {'comparisons s':>13} {'before':>7} {'ratio':>6} | {'relabel s':>9} {'before':>7}"
        f" {'ratio':>6}"
    )
    for shape, make in ACTION_SHAPES.items():
        for size in (10_000, 20_000, 40_000, 100_000, 1_000_000):
            action = make(size)
            step, prompts = min(time_action(action) for _ in range(3))
            parse, relabel = min(time_parsers(action, labels_and_protocol) for _ in range(3))
            row = (
                f"{shape:>12} {len(action):9,} | {step:7.4f} {1e9 * step / len(action):5.0f}"
                f" {prompts:9.4f} {1e9 * prompts / len(action):5.0f} | {parse:13.4f}"
            )
            if size <= 40_000:  # quadratic before: 1M characters would take an hour
                parse_before, relabel_before = time_parsers(action, before)
                row += f" {parse_before:7.3f} {parse_before / parse:5.0f}x | {relabel:9.4f}"
                row += f" {relabel_before:7.3f} {relabel_before / relabel:5.0f}x"
            else:
                row += f" {'':7} {'':6} | {relabel:9.4f}"
            print(row, flush=True)


def main() -> None:
    if "--actions" in sys.argv[1:]:
        actions()
        return
    num_agents, max_rounds, episodes = 3, 3, 400
    print(f"debate env: {num_agents} agents x {max_rounds} rounds x {episodes} episodes")
    print(f"{'':>12} {'turns/s':>12} {'us/turn':>10} {'vs parse only':>14}")
    seconds, turns = time_env("prompt", num_agents, max_rounds, 1)  # warm-up
    parse_seconds = None
    for mode, labels in (("prompt", False), ("chat", False), ("prompt", True), ("chat", True)):
        seconds, turns = time_env(mode, num_agents, max_rounds, episodes, labels)
        mode += " labels" if labels else ""
        if parse_seconds is None:
            parse_seconds = time_parse_only(num_agents, turns)
            print(
                f"{'parse only':>12} {turns / parse_seconds:12,.0f} "
                f"{1e6 * parse_seconds / turns:10.1f} {1:13.1f}x"
            )
        print(
            f"{'env ' + mode:>12} {turns / seconds:12,.0f} {1e6 * seconds / turns:10.1f} "
            f"{seconds / parse_seconds:13.1f}x"
        )

    # Shuffled labels rewrite every answer for every reader. Both columns grow as the
    # square of the agents (each prompt shows every answer); measured here, the labels
    # multiply it by 6 at 30 agents, levelling off at 11-12 from 300 on (it grew
    # without bound before the inverse labels were cached: 13x at 300 and rising).
    print(f"\n{'agents':>6} {'seat numbers':>13} {'shuffled labels':>16} {'ratio':>6}  (1 round)")
    for agents in (30, 100, 300, 600):
        plain, _ = time_env("prompt", agents, 1, 1)
        shuffled, _ = time_env("prompt", agents, 1, 1, shuffle_labels=True)
        print(f"{agents:>6} {plain:12.3f}s {shuffled:15.3f}s {shuffled / plain:5.1f}x")

    rng = random.Random(0)
    n = 8
    votes = [
        Vote(rng.randrange(n), rng.randrange(n + 1), rng.choice(">>=?"), rng.randrange(n))
        for _ in range(100_000)
    ]
    print(f"\npairwise rewards on {len(votes):,} votes ({n} agents, some malformed)")
    for fn in (win_rate, win_minus_loss):
        start = time.perf_counter()
        repeats = 5
        for _ in range(repeats):
            fn(votes, n)
        seconds = (time.perf_counter() - start) / repeats
        print(f"{fn.__name__:>15}: {seconds * 1e3:7.1f} ms  ({len(votes) / seconds:,.0f} votes/s)")

    actions()


if __name__ == "__main__":
    main()
