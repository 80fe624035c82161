"""Batched rollouts: run many environments at once, one batched sampler call per tick.

At every tick each unfinished environment has the requests of the agents that
must act now (one agent for an AEC environment, every live agent for a
parallel one). With one policy, every waiting request goes to it in one call.
With several (a trained policy and fixed opponents), a tick calls one policy:
the one with the most requests waiting; the other environments wait for a
later call. An environment steps once its acting agents all have their
completions. This repeats until every environment is done. The result is one
token-level :class:`~baselines.types.Trajectory` per (episode, agent).

Why one policy per tick: a call's time is mostly its sequential decoding
steps, so a call of twelve requests costs little more than one of four, and
what a rollout costs is its number of calls. Calling every policy at every
tick costs ``policies x turns`` calls; letting episodes whose next turn is
another policy's wait for it costs fewer when the episodes' seats differ
(a three-seat debate evaluated in every role: 8 calls instead of 12). Each
episode's own turns and their order are the same either way.

How PettingZoo's rewards and infos become transitions:

* A reward an agent sees at a live ``last()`` belongs to its previous turn.
  The reward it sees at its final, dead ``last()`` (the step reward of its
  last turn plus any group reward given when the episode ended) is its *final
  reward*; an agent that never acted still gets one. Returns are the same
  either way: R = sum of step rewards + final reward.
* A turn's info merges the context keys of the info seen *before* acting
  (``stop``, ``training_messages``, ``strategy``, ``round``, ``turn``; see
  :data:`llm_envs.contract.CONTEXT_KEYS`) with the outcome keys of the info
  seen *after* it (``loss_weight``, parse errors, test results...).
* An outcome key that a trainer reserves for a metric of its own
  (:data:`llm_envs.contract.RESERVED_INFO_KEYS`) is warned about, once per
  key (:func:`baselines.data.episode_metrics.warn_reserved_info_keys`).
* A group's per-trajectory metrics (``TrajectoryGroup.metrics_G``) are the
  numeric outcome values of each agent's last info, read by the one rule of
  :func:`baselines.data.episode_metrics.numeric_info`.

A rollout never parses environment text and never changes a completion: the
environment steps with exactly the text the sampler returned.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pettingzoo import AECEnv, ParallelEnv

from baselines.data.episode_metrics import numeric_info, warn_reserved_info_keys
from baselines.progress import phase
from baselines.samplers.base import Completion, Policy, SampleRequest, SamplingParams
from baselines.types import Trajectory, TrajectoryGroup, Transition
from llm_envs.contract import CONTEXT_KEYS, STRATEGY

__all__ = [
    "EpisodeResult",
    "PolicyAssignment",
    "group_by",
    "group_episodes",
    "rollout",
]

PolicyAssignment = Policy | Mapping[str, Policy] | Callable[[int, str], Policy]
"""Who samples for whom: one policy for every agent; a policy per agent name;
or ``assign(env_index, agent) -> policy`` (e.g. the trained policy in one role
and fixed opponents in the others)."""


@dataclass
class EpisodeResult:
    """One finished episode, in tokens.

    Attributes:
        trajectories: each agent's trajectory, by agent name (every possible agent).
        final_rewards: each agent's final reward (see the module docstring).
        final_infos: each agent's last info.
        env_index: the position of the environment in the rollout call.
    """

    trajectories: dict[str, Trajectory]
    final_rewards: dict[str, float]
    final_infos: dict[str, dict[str, Any]]
    env_index: int

    def to_group(self) -> TrajectoryGroup:
        """This episode as one group: its agents' returns are centred together (a debate)."""
        return _make_group([self], [a for a in self.trajectories])


@dataclass
class _Pending:
    context: dict[str, Any]
    completion: Completion


@dataclass
class _Episode:
    env: Any
    index: int
    turns: dict[str, list[Transition]] = field(default_factory=lambda: defaultdict(list))
    pending: dict[str, _Pending] = field(default_factory=dict)
    final_rewards: dict[str, float] = field(default_factory=dict)
    final_infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    strategy: dict[str, str | None] = field(default_factory=dict)
    # A parallel env's latest observations and infos (an AEC env keeps its own).
    observations: dict[str, Any] = field(default_factory=dict)
    infos: dict[str, Any] = field(default_factory=dict)
    # The turns of this tick that still wait for a completion.
    waiting: list[tuple[_Episode, str, SampleRequest]] = field(default_factory=list)

    def reset(self, seed: int | None, options: Mapping[str, Any] | None) -> None:
        """Reset the environment; keep a parallel env's first observations and infos."""
        opts = dict(options) if options else None
        if isinstance(self.env, ParallelEnv):
            self.observations, self.infos = self.env.reset(seed=seed, options=opts)
        else:
            self.env.reset(seed=seed, options=opts)

    def turns_to_sample(self) -> list[tuple[_Episode, str, SampleRequest]] | None:
        """The turns that must be sampled now; None once the episode has ended."""
        if isinstance(self.env, ParallelEnv):
            if not self.env.agents:
                return None
            return [
                (self, a, SampleRequest.for_turn(a, self.observations[a], self.infos.get(a, {})))
                for a in self.env.agents
            ]
        turn = _advance_aec(self)
        return None if turn is None else [(self, *turn)]

    def act(self, agent: str, request: SampleRequest, completion: Completion) -> None:
        """Record ``agent``'s sampled turn; an AEC env steps at once, a parallel one waits."""
        self.pending[agent] = _Pending(dict(request.info), completion)
        self.strategy.setdefault(agent, request.info.get(STRATEGY))
        if not isinstance(self.env, ParallelEnv):
            self.env.step(completion.text)

    def step_jointly(self, actions: Mapping[str, str]) -> None:
        """Step a parallel env with every acting agent's text; settle their turns."""
        self.observations, rewards, terms, truncs, self.infos = self.env.step(dict(actions))
        for agent in actions:
            done = bool(terms.get(agent) or truncs.get(agent))
            self.settle(agent, rewards.get(agent, 0.0), self.infos.get(agent, {}), done)
            if done:
                self.final_infos[agent] = dict(self.infos.get(agent, {}))

    def settle(self, agent: str, reward: float, info: Mapping[str, Any], done: bool) -> None:
        """Close the agent's pending turn with the reward and outcome info seen after it."""
        pending = self.pending.pop(agent, None)
        if pending is None:
            return
        outcome = {k: v for k, v in info.items() if k not in CONTEXT_KEYS}
        warn_reserved_info_keys(outcome, self.env)
        c = pending.completion
        self.turns[agent].append(
            Transition(
                observation=c.prompt_tokens,
                action=c.tokens,
                logprobs=c.logprobs,
                reward=float(reward),
                done=done,
                info={**pending.context, **outcome},
            )
        )

    def result(self) -> EpisodeResult:
        agents = list(self.env.possible_agents)
        trajectories = {}
        for agent in agents:
            turns = self.turns.get(agent, [])
            if turns and not turns[-1].done:
                last = turns[-1]
                turns[-1] = Transition(
                    last.observation, last.action, last.logprobs, last.reward, True, last.info
                )
            trajectories[agent] = Trajectory(
                tuple(turns), agent_id=agent, strategy=self.strategy.get(agent)
            )
        return EpisodeResult(
            trajectories=trajectories,
            final_rewards={a: self.final_rewards.get(a, 0.0) for a in agents},
            final_infos={a: self.final_infos.get(a, {}) for a in agents},
            env_index=self.index,
        )


def _resolve(assign: PolicyAssignment, env_index: int, agent: str) -> Policy:
    if isinstance(assign, Mapping):
        if agent not in assign:
            raise KeyError(f"no policy for agent {agent!r}; the mapping has {sorted(assign)}")
        return assign[agent]
    if isinstance(assign, Policy):
        return assign
    return assign(env_index, agent)


def _advance_aec(ep: _Episode) -> tuple[str, SampleRequest] | None:
    """Step dead agents and settle rewards until an agent must act; None once the episode ends."""
    env = ep.env
    while env.agents:
        agent = env.agent_selection
        observation, reward, terminated, truncated, info = env.last()
        if terminated or truncated:
            ep.settle(agent, 0.0, info, done=True)
            ep.final_rewards[agent] = float(reward)
            ep.final_infos[agent] = dict(info)
            env.step(None)
            continue
        ep.settle(agent, reward, info, done=False)
        return agent, SampleRequest.for_turn(agent, observation, info)
    return None


def rollout(
    envs: Sequence[AECEnv[Any, Any, Any] | ParallelEnv[Any, Any, Any]],
    policy: PolicyAssignment,
    params: SamplingParams | None = None,
    *,
    seeds: Sequence[int | None] | None = None,
    options: Sequence[Mapping[str, Any] | None] | None = None,
    progress: bool | str | None = False,
    timings: dict[str, float] | None = None,
) -> list[EpisodeResult]:
    """Play one episode in each environment, batching every pending turn per tick.

    Args:
        envs: AEC or parallel environments (mixing both is fine); each is reset here.
        policy: who samples for whom (:data:`PolicyAssignment`).
        params: sampling parameters for every call.
        seeds: a reset seed per environment.
        options: reset options per environment (e.g. ``{"question": ...}``).
        progress: show a progress bar of finished episodes (needs ``tqdm``; only
            in a terminal); a string labels the bar (e.g. ``"sample"``). Either
            way the rollout is a :func:`~baselines.progress.phase`, which a
            run's heartbeat reports without a terminal.
        timings: a dict to add this rollout's costs to: ``time/env`` (seconds in
            the environments' ``reset``/``step``), ``time/policy`` (seconds in
            the samplers) and ``sample/tokens`` (tokens sampled).

    Returns:
        One :class:`EpisodeResult` per environment, in order.
    """
    params = params or SamplingParams()
    n = len(envs)
    seeds = list(seeds) if seeds is not None else [None] * n
    options = list(options) if options is not None else [None] * n
    if len(seeds) != n or len(options) != n:
        raise ValueError(
            f"got {n} envs, {len(seeds)} seeds and {len(options)} options; give one of each per env"
        )

    costs = {"time/env": 0.0, "time/policy": 0.0, "sample/tokens": 0.0}
    start = time.perf_counter()
    episodes = [_Episode(env, i) for i, env in enumerate(envs)]
    for ep, seed, opts in zip(episodes, seeds, options, strict=True):
        ep.reset(seed, opts)
    costs["time/env"] += time.perf_counter() - start
    label = progress if isinstance(progress, str) else "episodes"
    active = list(episodes)
    calls = sampled = 0
    with phase(label, total=n, unit="episodes", bar=bool(progress)) as finished:
        while active:
            # 1. Every unfinished episode's turns that wait for a completion.
            still_active = []
            for ep in active:
                if not ep.waiting:
                    turns = ep.turns_to_sample()
                    if turns is None:
                        continue
                    ep.waiting = turns
                still_active.append(ep)
            finished.advance(len(active) - len(still_active))
            active = still_active
            if not active:
                break
            # 2. One batched call, to the policy with the most turns waiting,
            #    with seeds no earlier call used.
            wanted = _next_call([turn for ep in active for turn in ep.waiting], policy)
            start = time.perf_counter()
            completions = _sample(wanted, _call_params(params, calls))
            calls += 1
            costs["time/policy"] += time.perf_counter() - start
            costs["sample/tokens"] += sum(len(c.tokens) for c in completions)
            sampled += len(completions)
            finished.note = f"{sampled} turns sampled"
            # 3. Step every environment whose acting agents all have their completions.
            start = time.perf_counter()
            for (ep, agent, request, _), completion in zip(wanted, completions, strict=True):
                ep.act(agent, request, completion)
                ep.waiting = [t for t in ep.waiting if t[1] != agent]
                if isinstance(ep.env, ParallelEnv) and not ep.waiting:
                    ep.step_jointly({a: p.completion.text for a, p in ep.pending.items()})
            costs["time/env"] += time.perf_counter() - start
    if timings is not None:
        for key, value in costs.items():
            timings[key] = timings.get(key, 0.0) + value
    return [ep.result() for ep in episodes]


_SEED_STRIDE = 1 << 20
"""Seeds reserved per batched call: more than any call's requests."""


def _call_params(params: SamplingParams, call: int) -> SamplingParams:
    """The sampling parameters of the ``call``-th batched call of a rollout.

    A policy seeds request ``i`` of a call with ``seed + i``. Every turn of a
    rollout is a new call, so without an offset per call the agents of a
    debate, taking turns in the same slot of the batch, would draw the same
    random numbers and, from similar prompts, write the same answer.

    Example:
        >>> _call_params(SamplingParams(seed=7), 2).seed == 7 + 2 * _SEED_STRIDE
        True
        >>> _call_params(SamplingParams(seed=None), 2).seed is None
        True
    """
    return (
        params if params.seed is None else replace(params, seed=params.seed + call * _SEED_STRIDE)
    )


def _next_call(
    waiting: Sequence[tuple[_Episode, str, SampleRequest]], assign: PolicyAssignment
) -> list[tuple[_Episode, str, SampleRequest, Policy]]:
    """The turns of the next call: those of the policy with the most turns waiting.

    Ties go to the policy whose first waiting turn comes first, so the
    schedule, and with it every seed, depends on nothing but the episodes.
    """
    by_policy: dict[int, list[tuple[_Episode, str, SampleRequest, Policy]]] = {}
    for ep, agent, request in waiting:
        policy = _resolve(assign, ep.index, agent)
        by_policy.setdefault(id(policy), []).append((ep, agent, request, policy))
    return max(by_policy.values(), key=len)


def _sample(
    turns: Sequence[tuple[_Episode, str, SampleRequest, Policy]], params: SamplingParams
) -> list[Completion]:
    """One batched call of the turns' policy (they all have the same one)."""
    policy = turns[0][3]
    got = policy.sample([request for _, _, request, _ in turns], params)
    if len(got) != len(turns):
        raise RuntimeError(
            f"{type(policy).__name__}.sample returned {len(got)} completions "
            f"for {len(turns)} requests"
        )
    return list(got)


def _make_group(results: Sequence[EpisodeResult], agents: Iterable[str]) -> TrajectoryGroup:
    agents = list(agents)
    trajectories, finals, metrics = [], [], []
    for r in results:
        for agent in agents:
            trajectories.append(r.trajectories[agent])
            finals.append(r.final_rewards[agent])
            metrics.append(numeric_info(r.final_infos[agent]))
    return TrajectoryGroup(tuple(trajectories), tuple(finals), tuple(metrics))


def group_episodes(results: Sequence[EpisodeResult]) -> list[TrajectoryGroup]:
    """One group per episode, all its agents together (a debate: the debate recipe's groups)."""
    return [r.to_group() for r in results]


def group_by(
    results: Sequence[EpisodeResult],
    key: Callable[[EpisodeResult], Any],
    agents: Sequence[str] | None = None,
) -> list[TrajectoryGroup]:
    """Group episodes that share ``key(result)``: e.g. G samples of one problem (expert iteration).

    Args:
        results: finished episodes.
        key: the grouping key of an episode (e.g. ``lambda r: r.env_index // G``).
        agents: the agents whose trajectories join the group (default: every agent).
    """
    buckets: dict[Any, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        buckets[key(r)].append(r)
    return [
        _make_group(members, agents if agents is not None else members[0].trajectories)
        for members in buckets.values()
    ]
