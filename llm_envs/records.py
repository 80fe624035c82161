"""Episode records: a JSON-ready transcript of one episode, the same shape for every environment.

Every environment exposes ``record() -> EpisodeRecord`` on its unwrapped
form. Trainers save records next to their metrics, and
``python -m baselines.report RUN_DIR`` turns them into an HTML viewer, so a
person can read what each agent was shown, what it wrote, how the environment
read it and what it earned.

A record holds plain JSON types only (str, int, float, bool, None, lists and
dicts), so ``json.dumps(env.unwrapped.record())`` always works.

An environment builds its record with :func:`episode_record` and
:func:`turn_record`, which own the envelope (the keys and the copying); what it
writes itself is only its title, its summary and each turn's details.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from llm_envs.contract import Message, copy_messages

__all__ = ["EpisodeRecord", "TurnRecord", "episode_record", "turn_record"]


class TurnRecord(TypedDict):
    """One agent turn.

    Attributes:
        agent: the agent's name.
        round: the round (or turn number, for envs without rounds), 1-based.
        prompt: the chat the agent was shown.
        text: what it wrote, verbatim.
        details: how the environment read it: parsed fields, votes, parse
            errors, test results, feedback... (env-specific keys, JSON values).
    """

    agent: str
    round: int
    prompt: list[Message]
    text: str
    details: dict[str, Any]


class EpisodeRecord(TypedDict):
    """One episode.

    Attributes:
        env: the environment's name (its ``metadata["name"]``).
        title: a one-line description (the question, the task id...).
        summary: episode-level results (rewards, consensus, pass rate...).
        turns: every turn, in order.
    """

    env: str
    title: str
    summary: dict[str, Any]
    turns: list[TurnRecord]


def turn_record(
    agent: str,
    round: int,
    prompt: Sequence[Message],
    text: str,
    details: Mapping[str, Any] | None = None,
) -> TurnRecord:
    """One turn of a record; the prompt and details are copied, so later edits never reach it.

    Example:
        >>> turn = turn_record("agent_0", 1, [{"role": "user", "content": "1 + 1?"}], "2")
        >>> turn["agent"], turn["round"], turn["prompt"][0]["content"], turn["details"]
        ('agent_0', 1, '1 + 1?', {})
    """
    return {
        "agent": agent,
        "round": round,
        "prompt": copy_messages(prompt),
        "text": text,
        "details": dict(details or {}),
    }


def episode_record(
    env: str, title: str, summary: Mapping[str, Any], turns: Iterable[TurnRecord]
) -> EpisodeRecord:
    """The envelope of a record: the environment's name, a title, the summary and the turns.

    Args:
        env: the environment's ``metadata["name"]``.
        title: one line: the question, the task id...
        summary: episode-level results (copied).
        turns: every turn, in order (from :func:`turn_record`).

    Example:
        >>> record = episode_record("demo_v0", "1 + 1?", {"solved": True}, [])
        >>> record["env"], record["title"], record["summary"], record["turns"]
        ('demo_v0', '1 + 1?', {'solved': True}, [])
    """
    return {"env": env, "title": title, "summary": dict(summary), "turns": list(turns)}
