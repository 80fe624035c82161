"""What MAGRPO trains on: an environment family whose agents act together for one team reward.

MAGRPO takes any registered family (:mod:`llm_envs.family`) that

* plays PettingZoo ``ParallelEnv`` environments: every agent acts at every turn,
  so the agents' completions at a node form joint actions, each stepped at once;
* declares a team reward (:attr:`~llm_envs.capabilities.TeamReward.team_reward`): every
  agent of a joint action is paid the same reward, the one its completion is
  credited with (:mod:`baselines.magrpo.credit`);
* has at least one agent (one agent is single-agent GRPO on the same tree) and,
  where its environments declare a horizon (``env.config.num_turns``), allows
  the tree's ``num_turns``.

:func:`team_family` builds the family from the config and refuses any other,
naming the reason, before a model is loaded. A tree grows from each training
group of the family's plan (:meth:`~llm_envs.family.Family.training`), a chain
from each evaluation group (:meth:`~llm_envs.family.Family.evaluation`): the
group's first episode, reset to its seed and options, is the root
(:func:`plan_roots`).

This module never imports torch and never names a family.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from pettingzoo import AECEnv, ParallelEnv

from baselines.env_families import family_of
from baselines.magrpo.config import MAGRPOConfig
from llm_envs.capabilities import HeldOutProblems, TeamReward, require
from llm_envs.family import EpisodePlan, Family

__all__ = ["check_team_family", "plan_roots", "team_family"]


def team_family(config: MAGRPOConfig) -> Family:
    """The family ``config`` trains on, its ``eval_problems`` held out of training.

    Raises:
        ValueError: a bad env or task setting (the family's own message), a
            family MAGRPO cannot train (:func:`check_team_family`), or more
            held-out problems than the family can spare.
    """
    family = family_of(config, num_generations=1)  # the tree replaces a family's own groups
    check_team_family(family, config.num_turns, seed=config.seed)
    try:
        return cast(HeldOutProblems, family).holding_out(config.eval_problems)  # FamilyBase's
    except ValueError as error:
        raise ValueError(f"eval_problems={config.eval_problems}: {error}") from error


def check_team_family(family: Family, num_turns: int, *, seed: int = 0) -> None:
    """Refuse a family MAGRPO cannot train (see the module docstring), naming why.

    One training episode of the family is built to look at its environment;
    nothing is reset or stepped.

    Raises:
        ValueError: no team reward, environments that are not parallel, no
            agents (or others than the family's ``agents``), or a horizon
            shorter than ``num_turns``.
    """
    name = family.name
    require(family, TeamReward, by="MAGRPO trains agents on one team reward")
    plan = family.training([0], seed)
    try:
        if not plan.envs:
            raise ValueError(f"--env {name} plans no episode for a training group")
        env = plan.envs[0]
        if not isinstance(env, ParallelEnv):
            kind = "an AEC environment (agents take turns)" if isinstance(env, AECEnv) else "no"
            raise ValueError(
                f"MAGRPO steps every agent's action at once, in a parallel environment "
                f"(pettingzoo.ParallelEnv); --env {name} plays {type(env).__name__}, {kind} "
                "parallel environment"
            )
        if not env.possible_agents:
            raise ValueError(f"--env {name} plays an environment without agents")
        if list(env.possible_agents) != list(family.agents):
            # The trainer's agent order is the trees' (credit is indexed by it).
            raise ValueError(
                f"--env {name}'s family lists its agents as {list(family.agents)}, its "
                f"environment as {list(env.possible_agents)}: they must agree, in order"
            )
        horizon = getattr(getattr(env, "config", None), "num_turns", None)
        if isinstance(horizon, int) and num_turns > horizon:
            raise ValueError(
                f"num_turns={num_turns} exceeds the env's horizon of {horizon} turns; lower "
                f"--num-turns or raise the env's (--env-kwargs '{{\"num_turns\": {num_turns}}}')"
            )
    finally:
        for built in plan.envs:
            built.close()


def plan_roots(plan: EpisodePlan) -> tuple[list[Any], list[Any]]:
    """The root of each group of ``plan``: its first episode's env, reset; and each reset's result.

    Groups come in the order of their first episode. The other episodes of a
    group (a family that plans several per group) are not played: the tree's
    G completions per node take their place.
    """
    roots: list[Any] = []
    resets: list[Any] = []
    seen: set[Hashable] = set()
    for env, seed, options, key in zip(
        plan.envs, plan.seeds, plan.options, plan.group_keys, strict=True
    ):
        if key in seen:
            env.close()
            continue
        seen.add(key)
        resets.append(env.reset(seed=seed, options=options))
        roots.append(env)
    return roots, resets
