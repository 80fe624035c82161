"""Benchmark the debate environment and the pairwise reward functions.

Measures agent-turns per second of the debate env with pre-written scripted
answers (parse + prompt + step: everything the env adds to a rollout), in
both observation modes, side by side with the cost of parsing the same answers
alone (the baseline: the work no environment can avoid), with and without
shuffled labels (and against the number of agents), and the reward functions
on large vote lists.

    python bench/debate.py
"""

from __future__ import annotations

import random
import time

from llm_envs.debate import DebateEnv, format_answer, parse_response
from llm_envs.debate.rewards import Vote, win_minus_loss, win_rate


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


def main() -> None:
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


if __name__ == "__main__":
    main()
