"""A model-free tour of the three environment families, played by scripted agents.

No model, no GPU, no data download: each section plays one episode with the
scripted agents of its family (:mod:`llm_envs.debate.agents`,
:mod:`llm_envs.expert_iteration.agents`, :mod:`llm_envs.code_collab.agents`)
and prints what a trainer would see.

1. Debate: three agents answer, judge and vote; the final reward is each
   agent's leave-one-out win rate.
2. Expert iteration, two-turn feedback: a solver answers wrong, gets the
   verifier's feedback, answers right; the infos carry the training context
   (the feedback removed) and attempt 1's zero loss weight.
3. Code collaboration: a helper writes ``aux`` with a bug, the main agent
   calls it; level feedback shows the failing test; both fix their code.

    python examples/tour.py
"""

from __future__ import annotations

import textwrap
from typing import Any

from llm_envs import code_collab, debate, expert_iteration
from llm_envs.code_collab import ScriptedCoder
from llm_envs.debate import scripted_debaters
from llm_envs.expert_iteration import ScriptedMathSolver
from llm_envs.tasks import CodeProblem, MathProblem


def show(label: str, text: str, width: int = 96, lines: int = 12) -> None:
    body = text.strip().splitlines()
    cut = body[:lines] + (["..."] if len(body) > lines else [])
    print(f"  {label}:")
    for line in cut:
        print(textwrap.indent(textwrap.shorten(line, width) if line else "", "    "))


def play(env: Any, agents: dict[str, Any], seed: int = 0, options: Any = None) -> dict[str, Any]:
    """Play an AEC episode; return each agent's final (reward, info)."""
    env.reset(seed=seed, options=options)
    final = {}
    for agent in env.agent_iter():
        observation, reward, terminated, truncated, info = env.last()
        if terminated or truncated:
            final[agent] = (reward, info)
            env.step(None)
            continue
        env.step(agents[agent](observation, info))
    return final


def tour_debate() -> None:
    print("\n=== 1. Debate (llm_envs/Debate-v0) ===")
    env = debate.env(num_agents=3, max_rounds=3, questions=["What is 17 * 23?"])
    agents = scripted_debaters(3, seed=0, solution="17 * 23 = 391")
    final = play(env, agents)
    base = env.unwrapped
    first = base.turns[0]
    show("agent_0's first prompt (user message)", first.prompt[1]["content"], lines=6)
    show("agent_0's first answer", first.text, lines=8)
    print(f"  rounds: {base.turns[-1].round}, consensus: {base.consensus_reached}")
    print(f"  votes: {[f'{v.author}: {v.a} {v.op} {v.b}' for v in base.votes]}")
    for agent, (reward, info) in final.items():
        print(f"  {agent}: final reward {reward:.3f} (valid votes {info['pairwise_total_votes']})")


def tour_expert_iteration() -> None:
    print("\n=== 2. Expert iteration, two-turn feedback (llm_envs/ExpertIteration-v0) ===")
    problem = MathProblem("tour/1", "What is 12 + 30?", "42")
    env = expert_iteration.raw_env(strategy="two_turn_feedback", problems=[problem])
    solver = ScriptedMathSolver()
    env.reset(seed=0)
    for attempt in (1, 2):
        observation, reward, _, _, info = env.last()
        show(f"attempt {attempt}: what the solver is shown", observation["messages"][-1]["content"])
        if "training_messages" in info:
            show(
                f"attempt {attempt}: what it is trained on (last message)",
                info["training_messages"][-1]["content"],
            )
        text = solver(observation, info)
        show(f"attempt {attempt}: its answer", text)
        env.step(text)
        if attempt == 2:
            print(f"  attempt 1's loss weight (an outcome key): {info['loss_weight']}")
    _, reward, terminated, truncated, info = env.last()
    print(f"  episode over: {terminated or truncated}; final reward {reward}")
    print(f"  attempt 2 outcome: correct={info.get('correct')}, loss weight {info['loss_weight']}")


def tour_code_collab() -> None:
    print("\n=== 3. Code collaboration (llm_envs/CodeCollab-v0) ===")
    problem = CodeProblem(
        task_id="tour/sum_of_squares",
        prompt=(
            "def sum_of_squares(xs):\n"
            '    """Return the sum of the squares of the numbers in xs."""\n'
        ),
        entry_point="sum_of_squares",
        tests=(
            "assert candidate([1, 2, 3]) == 14",
            "assert candidate([]) == 0",
            "assert candidate([-2]) == 4",
        ),
        test_setup="candidate = sum_of_squares",
    )
    helper = ScriptedCoder(
        [
            "def aux(x):\n    return x * 2\n",  # a bug: doubles instead of squaring
            "def aux(x):\n    return x * x\n",
        ]
    )
    main = ScriptedCoder(
        "def sum_of_squares(xs):\n    total = 0\n    for x in xs:\n"
        "        total += aux(x)\n    return total\n"
    )
    env = code_collab.parallel_env(problems=[problem], num_turns=2)
    observations, infos = env.reset(seed=0)
    turn = 1
    while env.agents:
        actions = {
            "helper": helper(observations["helper"], infos["helper"]),
            "main": main(observations["main"], infos["main"]),
        }
        observations, rewards, _, _, infos = env.step(actions)
        info = infos["main"]
        print(
            f"  turn {turn}: reward {rewards['main']:.2f} = level1 {info['level1']} + level2 "
            f"{info['level2']} + level3 {info['level3']:.2f} + bonus {info['bonus']} "
            f"({info['passed']}/{info['total_tests']} tests)"
        )
        if env.agents:
            show("feedback to the helper", observations["helper"]["messages"][-1]["content"])
        turn += 1


def main() -> None:
    tour_debate()
    tour_expert_iteration()
    tour_code_collab()


if __name__ == "__main__":
    main()
