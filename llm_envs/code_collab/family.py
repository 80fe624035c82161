"""The code-collaboration family: a team writes one program, scored by the tests.

* Training: one group per problem, ``num_generations`` episodes of it, every
  seat played by the trained policy (one model as helper and main; with
  ``num_agents=1`` the main agent alone), ``num_turns`` turns per agent.
* Evaluation: one episode per problem of the data set; :meth:`~CodeCollabFamily.holding_out`
  keeps its last problems for evaluation alone (MAGRPO's held-out problems).
* A team: every agent acting in a turn receives that turn's team reward (the
  joint action's, shift included), in the env and in the report.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self, Unpack, get_args

from llm_envs.client_settings import ClientSettings, Number, OneOf, Whole
from llm_envs.code_collab.rewards import MAX_TEAM_REWARD, AuxBonus
from llm_envs.family import Agent, EpisodePlan, EpisodeRewards, FamilyBase, RunSettings
from llm_envs.formatting import fmt
from llm_envs.seeding import derive_seed, ordered

__all__ = ["CodeCollabFamily"]


class CodeCollabFamily(FamilyBase):
    """Code collaboration as a family (see the module docstring).

    Args:
        env_kwargs: :func:`llm_envs.code_collab.parallel_env` arguments.
        task: ``default`` (``coophumaneval``), ``coophumaneval``, ``humaneval`` or ``mbpp``.
        seed: the run's seed (problem order).
        task_kwargs: ``{"num_problems": n}`` keeps the data set's first ``n``
            problems (a small run); nothing else is taken.
        num_generations: episodes of one problem per training group (default 4);
            the run option's name is TRL GRPO's, as in every family.
    """

    name: ClassVar[str] = "code_collab"
    run_options: ClassVar[tuple[str, ...]] = ("num_generations",)
    tasks: ClassVar[tuple[str, ...]] = ("default", "coophumaneval", "humaneval", "mbpp")
    headline_metrics: ClassVar[tuple[str, ...]] = ("pass_rate", "total")
    metric_titles: ClassVar[Mapping[str, str]] = {"pass_rate": "pass rate", "total": "code reward"}
    team_reward: ClassVar[bool] = True
    # The game's settings only: the sandbox's timeout (and the pool) are the server's,
    # and each turn is a test run, so a client's episode takes at most 4.
    # expert_edits needs an expert, which no JSON request can pass.
    client_settings: ClassVar[ClientSettings] = ClientSettings(
        env_kwargs={
            "num_agents": Whole(1, 2),
            "num_turns": Whole(1, 4),
            "external_mode": OneOf(("level_feedback", "plain")),
            "sandbox_slice": Whole(-64, 64),
            "termination_threshold": Number(-100, 100, nullable=True),
            "reward_shift": Number(-100, 100),
            "aux_bonus": OneOf(get_args(AuxBonus)),
        },
        task_kwargs={"num_problems": Whole(1, 100_000)},
    )

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        num_generations: int = 4,
        **run: Unpack[RunSettings],
    ) -> None:
        from llm_envs.code_collab import load_problems, parallel_env

        if "problems" in env_kwargs:
            raise ValueError("pass code problems through `task`, not env_kwargs['problems']")
        super().__init__(env_kwargs, **run)
        unknown = sorted(set(self.task_kwargs) - {"num_problems"})
        if unknown:
            raise ValueError(
                f"code collaboration takes task_kwargs {{'num_problems': n}} only, got {unknown}"
            )
        if num_generations < 1:
            raise ValueError(f"num_generations must be >= 1, got {num_generations}")
        dataset: Any = "coophumaneval" if self.task == "default" else self.task  # the loader checks
        self.problems = tuple(load_problems(dataset))
        if "num_problems" in self.task_kwargs:
            count = self.task_kwargs["num_problems"]
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError(f"task_kwargs num_problems must be an int >= 1, got {count!r}")
            self.problems = self.problems[:count]
        # Training and evaluation play the same problems until some are held out.
        self.train_problems = self.eval_problems = self.problems
        self.num_eval_problems = len(self.problems)
        probe = parallel_env(problems=self.problems, **self.env_kwargs)  # checks env_kwargs
        self.agents = tuple(probe.possible_agents)
        self.max_agent_turns = probe.config.num_turns  # every agent acts in every turn
        # Each turn pays the team reward, in [0, MAX_TEAM_REWARD], plus the shift; an
        # episode has 1 to num_turns turns (termination_threshold may end it early).
        shift, turns = probe.config.reward_shift, probe.config.num_turns
        per_turn = (shift, MAX_TEAM_REWARD + shift)
        self.reward_range = (
            min(per_turn[0], turns * per_turn[0]),
            max(per_turn[1], turns * per_turn[1]),
        )
        probe.close()
        self.num_generations = num_generations

    def _plan(self, problems: list[Any], seeds: list[int], keys: list[int]) -> EpisodePlan:
        from llm_envs.code_collab import parallel_env

        return EpisodePlan(
            envs=[parallel_env(problems=self.problems, **self.env_kwargs) for _ in problems],
            seeds=seeds,
            options=[{"problem": p} for p in problems],
            group_keys=list(keys),
            trained_agents=[frozenset(self.agents)] * len(problems),
            titles=[f"{p.task_id} ({p.entry_point})" for p in problems],
        )

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """``num_generations`` episodes of one problem per group index."""
        n = self.num_generations
        problems, seeds, keys = [], [], []
        for g in group_indices:
            problem = ordered(self.train_problems, g, self.seed)
            for k in range(n):
                problems.append(problem)
                seeds.append(derive_seed(seed, g, k))
                keys.append(g)
        return self._plan(problems, seeds, keys)

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """One episode per problem index."""
        problems = [self.eval_problems[g % len(self.eval_problems)] for g in group_indices]
        return self._plan(
            problems, [derive_seed(seed, g) for g in group_indices], list(group_indices)
        )

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        """Problem ``problem`` of the data set."""
        from llm_envs.code_collab import parallel_env

        env = parallel_env(problems=self.problems, **self.env_kwargs)
        return env, seed, {"problem": self.eval_problems[problem % len(self.eval_problems)]}

    def holding_out(self, count: int) -> Self:
        """The family with the data set's last ``count`` problems for evaluation alone.

        Training visits the other problems (in the seeded order), evaluation
        the held-out ones, in data-set order.

        Raises:
            ValueError: ``count`` leaves no problem to train on.
        """
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if count == 0:
            return self
        total = len(self.problems)
        if count >= total:
            raise ValueError(
                f"holding out {count} of the {total} problems leaves none to train on; "
                "hold out fewer"
            )
        held = copy.copy(self)
        held.train_problems = self.problems[: total - count]
        held.eval_problems = self.problems[total - count :]
        held.num_eval_problems = count
        return held

    def reference_players(self) -> dict[str, Agent]:
        """``main`` writes the data set's reference solution; ``helper`` writes nothing.

        (The single-agent maximum: level 1's entry-point 0.6, level 2, every test.)

        Raises:
            ValueError: a data set without reference solutions (CoopHumanEval).
        """
        from llm_envs.code_collab.agents import CanonicalCoder, ScriptedCoder

        missing = [p.task_id for p in self.problems if p.canonical_solution is None]
        if missing:
            raise ValueError(
                f"--env code_collab's reference players write each problem's reference solution, "
                f"and {missing[0]} ({len(missing)} of {len(self.problems)} problems) has none; "
                "use --task humaneval or mbpp"
            )
        players: dict[str, Agent] = {
            "helper": ScriptedCoder(""),
            "main": CanonicalCoder(self.problems),
        }
        return {agent: players[agent] for agent in self.agents}

    @staticmethod
    def episode_rewards(record: Mapping[str, Any], env_kwargs: Mapping[str, Any]) -> EpisodeRewards:
        """Each turn's team reward, received by every agent that acted in it."""
        rewards = [float(r) for r in record["summary"]["rewards"]]
        agents = list(dict.fromkeys(t["agent"] for t in record["turns"]))
        total, how, per_turn = {}, {}, {}
        for agent in agents:
            rounds = sorted({t["round"] for t in record["turns"] if t["agent"] == agent})
            total[agent] = sum(rewards[r - 1] for r in rounds)
            parts = [f"turn {r}: {fmt(rewards[r - 1])}" for r in rounds]
            shared = " (the team reward, shared)" if len(agents) > 1 else ""
            how[agent] = " + ".join(parts) + shared
            for r in rounds:
                per_turn[(r, agent)] = f"team reward {fmt(rewards[r - 1])}"
        return EpisodeRewards(total, how, per_turn)
