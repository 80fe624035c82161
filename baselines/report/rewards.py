"""What each agent earned in an episode, read from its record the way its environment pays."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from baselines.report.metrics import _fmt, _number


@dataclass(frozen=True)
class EpisodeRewards:
    """What each agent earned in one episode, read from its record.

    Attributes:
        total: agent -> its return (every reward it received in the episode).
        how: agent -> how the return adds up, in words.
        per_turn: ``(round, agent)`` -> the reward of that turn, in words.
    """

    total: dict[str, float]
    how: dict[str, str]
    per_turn: dict[tuple[int, str], str]


def _debate_rewards(record: Mapping[str, Any], env_kwargs: Mapping[str, Any]) -> EpisodeRewards:
    # debate.env(): a -1 step reward per parse error in "penalize" mode, plus the
    # pairwise reward of env_kwargs["reward"] (win_rate by default) at the end.
    summary = record["summary"]
    mode = env_kwargs.get("reward", "win_rate")
    penalize = env_kwargs.get("on_parse_error", "penalize") == "penalize"
    pairwise = summary[mode] if mode else [0.0] * len(summary["win_rate"])
    shaping = env_kwargs.get("shaping") or {}
    total, how, per_turn = {}, {}, {}
    for i, value in enumerate(pairwise):
        agent = f"agent_{i}"
        errors = [
            t["round"]
            for t in record["turns"]
            if t["agent"] == agent and t.get("details", {}).get("parse_error")
        ]
        penalty = -1.0 * len(errors) if penalize else 0.0
        parts = [f"parse-error penalty {_fmt(penalty)}"] if penalty else []
        parts.append(f"{mode} {_fmt(value)}" if mode else "no pairwise reward (reward=None)")
        shaped = _debate_shaping(record, agent, shaping) if shaping else {}
        if shaped:
            parts.append(f"shaping {_fmt(sum(shaped.values()))}")
        total[agent] = penalty + float(value) + sum(shaped.values())
        how[agent] = " + ".join(parts)
        for r in errors:
            per_turn[(r, agent)] = "parse-error penalty -1" if penalize else "masked (reward 0)"
        for r, bonus in shaped.items():
            said = per_turn.get((r, agent))
            per_turn[(r, agent)] = (f"{said} + " if said else "") + f"shaping {_fmt(bonus)}"
    return EpisodeRewards(total, how, per_turn)


def _debate_shaping(
    record: Mapping[str, Any], agent: str, shaping: Mapping[str, float]
) -> dict[int, float]:
    # debate.env(shaping=...): each answer's partial credit, recomputed by the env's own rules.
    from llm_envs.debate.protocol import parse_comparisons
    from llm_envs.wrappers.shaping import judge_score, shaping_reward, visible_correctness

    reference = record["summary"].get("reference_answer") is not None
    seen: list[tuple[int, bool]] = []  # (author, solution_correct) of the answers so far
    shaped: dict[int, float] = {}
    for t in record["turns"]:
        author = int(t["agent"].rsplit("_", 1)[-1])
        correct = bool(t["details"].get("solution_correct"))
        if t["agent"] == agent:
            judgement = None
            if reference:
                votes = parse_comparisons("\n".join(t["details"].get("votes", [])), author)
                judgement = judge_score(votes.comparisons, visible_correctness(seen, author))
            shaped[t["round"]] = shaping_reward(
                t["text"],
                correct if reference else None,
                contract=float(shaping.get("contract", 0.0)),
                correct=float(shaping.get("correct", 0.0)),
                judge=float(shaping.get("judge", 0.0)),
                judgement=judgement,
            )
        seen.append((author, correct))
    return shaped


def _code_collab_rewards(record: Mapping[str, Any], _: Mapping[str, Any]) -> EpisodeRewards:
    # Every agent acting in a turn gets the team reward of the joint action (shift included).
    rewards = [float(r) for r in record["summary"]["rewards"]]
    agents = list(dict.fromkeys(t["agent"] for t in record["turns"]))
    total, how, per_turn = {}, {}, {}
    for agent in agents:
        rounds = sorted({t["round"] for t in record["turns"] if t["agent"] == agent})
        total[agent] = sum(rewards[r - 1] for r in rounds)
        parts = [f"turn {r}: {_fmt(rewards[r - 1])}" for r in rounds]
        how[agent] = " + ".join(parts) + (" (the team reward, shared)" if len(agents) > 1 else "")
        for r in rounds:
            per_turn[(r, agent)] = f"team reward {_fmt(rewards[r - 1])}"
    return EpisodeRewards(total, how, per_turn)


def _expert_iteration_rewards(
    record: Mapping[str, Any], env_kwargs: Mapping[str, Any]
) -> EpisodeRewards:
    # The solver's final attempt earns its score (+ format_reward when formatted); an
    # earlier attempt earns nothing; the critic earns attempt 2's score minus attempt 1's.
    bonus = float(env_kwargs.get("format_reward", 0.0))
    attempts = [t for t in record["turns"] if t["agent"] == "solver"]
    total, how, per_turn = {}, {}, {}
    if attempts:
        final = attempts[-1]["details"]
        earned = float(final["score"]) + (bonus if final.get("formatted") else 0.0)
        parts = [f"attempt {final['attempt']}'s score {_fmt(float(final['score']))}"]
        if bonus and final.get("formatted"):
            parts.append(f"format reward {_fmt(bonus)}")
        total["solver"], how["solver"] = earned, " + ".join(parts)
        for turn in attempts[:-1]:
            how["solver"] += f" (attempt {turn['details']['attempt']} is not rewarded)"
            per_turn[(turn["round"], "solver")] = "not rewarded (an earlier attempt)"
        per_turn[(attempts[-1]["round"], "solver")] = f"reward {_fmt(earned)}"
    if any(t["agent"] == "critic" for t in record["turns"]) and len(attempts) == 2:
        first, second = (float(t["details"]["score"]) for t in attempts)
        total["critic"] = second - first
        how["critic"] = f"attempt 2's score {_fmt(second)} - attempt 1's {_fmt(first)}"
        per_turn[(1, "critic")] = f"reward {_fmt(second - first)}"
    return EpisodeRewards(total, how, per_turn)


def _recorded_rewards(record: Mapping[str, Any], _: Mapping[str, Any]) -> EpisodeRewards:
    # Any other environment: rewards the record states per agent, or per turn.
    for stated in (record.get("rewards"), record.get("summary", {}).get("rewards")):
        if isinstance(stated, Mapping) and stated:
            total = {str(a): float(v) for a, v in stated.items() if _number(v) is not None}
            return EpisodeRewards(total, dict.fromkeys(total, "as recorded"), {})
    total, per_turn = {}, {}
    for turn in record.get("turns", []):
        value = _number(turn.get("details", {}).get("reward"))
        if value is not None:
            total[turn["agent"]] = total.get(turn["agent"], 0.0) + value
            per_turn[(turn["round"], turn["agent"])] = f"reward {_fmt(value)}"
    return EpisodeRewards(total, dict.fromkeys(total, "sum of its turns' rewards"), per_turn)


_REWARD_READERS = {
    "debate": _debate_rewards,
    "code_collab": _code_collab_rewards,
    "expert_iteration": _expert_iteration_rewards,
}


def episode_rewards(
    record: Mapping[str, Any], env_kwargs: Mapping[str, Any] | None = None
) -> EpisodeRewards | None:
    """Each agent's reward in an episode, read from its record; None when it does not say.

    A record holds what the environment scored, not the reward stream, so this
    adds it up the way the environment pays it:

    * debate: a -1 penalty per parse error (``on_parse_error="penalize"``, the
      default) plus the final pairwise reward named by ``env_kwargs["reward"]``
      (``win_rate`` by default) from the summary, plus each answer's shaping
      when ``env_kwargs["shaping"]`` asked for it;
    * code collaboration: each turn's team reward (``summary["rewards"]``,
      shift included), received by every agent that acted in it;
    * expert iteration: the solver's final attempt's score (plus
      ``format_reward`` when formatted); the critic's improvement;
    * other environments: a ``rewards`` mapping of the record or its summary,
      else the ``reward`` of each turn's details.

    Args:
        record: an :class:`~llm_envs.records.EpisodeRecord`.
        env_kwargs: the environment's arguments, as the run's ``config.json``
            holds them (``reward``, ``on_parse_error``, ``format_reward``).

    Example:
        >>> record = {"env": "debate_v0", "turns": [{"agent": "agent_0", "round": 1,
        ...     "details": {"parse_error": "missing <solution>"}}],
        ...     "summary": {"win_rate": [0.0, 0.0, 0.0], "win_minus_loss": [0.0, 0.0, 0.0]}}
        >>> rewards = episode_rewards(record)
        >>> rewards.total
        {'agent_0': -1.0, 'agent_1': 0.0, 'agent_2': 0.0}
        >>> rewards.how["agent_0"]
        'parse-error penalty -1 + win_rate 0'
    """
    name = str(record.get("env", "")).rsplit("_v", 1)[0]
    reader = _REWARD_READERS.get(name, _recorded_rewards)
    try:
        rewards = reader(record, env_kwargs or {})
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None  # a record of another shape: the page shows it without rewards
    return rewards if rewards.total else None
