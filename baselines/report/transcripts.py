"""Transcript pages: per episode, each agent's reward, then its turns."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baselines.report._common import _STYLE
from baselines.report.rewards import EpisodeRewards, episode_rewards
from llm_envs.family import fmt as _fmt


def _is_chat(value: Any) -> bool:
    """A list of ``{"role", "content"}`` messages (a prompt, or a training context)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in value)
    )


def _chat_html(messages: Sequence[Mapping[str, Any]]) -> str:
    return "".join(
        f"<b>{html.escape(str(m.get('role', '')))}</b>"
        f"<pre>{html.escape(str(m.get('content', '')))}</pre>"
        for m in messages
    )


def _value_html(value: Any) -> str:
    if _is_chat(value):
        return f"<details><summary>{len(value)} messages</summary>{_chat_html(value)}</details>"
    if isinstance(value, str):
        return (
            f"<pre>{html.escape(value)}</pre>"
            if "\n" in value or len(value) > 80
            else html.escape(value)
        )
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "<br>".join(html.escape(v) for v in value) or "<i>none</i>"
    if isinstance(value, float):
        return _fmt(value)
    return html.escape(json.dumps(value, ensure_ascii=False))


def _table(mapping: Mapping[str, Any], css: str) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{_value_html(v)}</td></tr>"
        for k, v in mapping.items()
        if v is not None
    )
    return f'<table class="{css}">{rows}</table>'


#: A raw output longer than this shows its first lines, the whole text one click away.
_OUTPUT_LINES, _OUTPUT_CHARS = 60, 6000
_PREVIEW_LINES, _PREVIEW_CHARS = 25, 2500


def _output_html(text: str) -> str:
    """The model's raw output, shown; a very long one is cut, the whole text under a click."""
    lines = text.splitlines()
    label = f'<div class="label">raw output ({len(text)} characters)</div>'
    if not text:
        return label + '<p class="muted">(empty)</p>'
    if len(lines) <= _OUTPUT_LINES and len(text) <= _OUTPUT_CHARS:
        return f'{label}<pre class="output">{html.escape(text)}</pre>'
    preview = "\n".join(lines[:_PREVIEW_LINES])[:_PREVIEW_CHARS]
    return (
        f'{label}<pre class="output">{html.escape(preview)}\n…</pre>'
        f"<details><summary>the whole output ({len(lines)} lines)</summary>"
        f'<pre class="output">{html.escape(text)}</pre></details>'
    )


def _rewards_html(rewards: EpisodeRewards | None) -> str:
    if rewards is None:
        return '<p class="muted">This record does not say what each agent earned.</p>'
    rows = "".join(
        f'<tr><td class="agent">{html.escape(agent)}</td><td class="n">{_fmt(value)}</td>'
        f"<td>{html.escape(rewards.how.get(agent, ''))}</td></tr>"
        for agent, value in rewards.total.items()
    )
    return (
        f'<table class="rewards"><tr><th>agent</th><th>reward</th><th>from</th></tr>{rows}</table>'
    )


def _turn_html(turn: Mapping[str, Any], gain: str | None) -> str:
    details = dict(turn.get("details") or {})
    error = details.pop("parse_error", None) or details.pop("error", None)
    prompt = turn.get("prompt") or []
    error_html = f'<p class="error-text">{html.escape(str(error))}</p>' if error else ""
    gain_html = f'<span class="gain">{html.escape(gain)}</span>' if gain else ""
    return (
        f'<div class="turn{" error" if error else ""}"><div class="head">'
        f'<span class="agent">{html.escape(str(turn.get("agent", "?")))}</span>{gain_html}</div>'
        f"{error_html}{_output_html(str(turn.get('text', '')))}"
        f"{_table(details, 'fields')}"
        f"<details><summary>prompt ({len(prompt)} messages)</summary>{_chat_html(prompt)}"
        "</details></div>"
    )


def episode_html(
    record: Mapping[str, Any],
    heading: str = "",
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    anchor: str = "",
) -> str:
    """One episode as an HTML fragment.

    What each agent earned (:func:`episode_rewards`), the summary, then per
    round and agent: the turn's reward, its raw output (shown; cut when very
    long), what the environment read from it, and the prompt (folded).

    Args:
        record: an :class:`~llm_envs.records.EpisodeRecord`.
        heading: the episode's heading (default: its title).
        env_kwargs: the run's environment arguments (see :func:`episode_rewards`).
        anchor: an ``id`` for the heading, to link to.
    """
    rewards = episode_rewards(record, env_kwargs)
    anchor_html = f'<a id="{html.escape(anchor)}"></a>' if anchor else ""
    parts = [
        f"{anchor_html}<h2>{html.escape(heading or str(record.get('title', 'episode')))}</h2>",
        _rewards_html(rewards),
        _table(record.get("summary") or {}, "summary"),
    ]
    current_round = None
    for turn in record.get("turns") or []:
        if turn.get("round") != current_round:
            current_round = turn.get("round")
            parts.append(f"<h3>Round {html.escape(str(current_round))}</h3>")
        gain = rewards.per_turn.get((turn.get("round"), turn.get("agent"))) if rewards else None
        parts.append(_turn_html(turn, gain))
    return "\n".join(parts)


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def _read_records(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of an episode file, and a note per line that is not one (skipped)."""
    records, problems = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict):
            records.append(record)
        else:
            problems.append(f"{path.name}:{number} is not a JSON object: skipped")
    return records, problems


@dataclass
class _EpisodeFile:
    path: Path
    records: list[dict[str, Any]]
    problems: list[str]
    rewards: list[EpisodeRewards | None]

    def mean_rewards(self) -> dict[str, float]:
        """Agent -> its mean reward over the file's episodes that say."""
        sums: dict[str, list[float]] = {}
        for rewards in self.rewards:
            for agent, value in (rewards.total if rewards else {}).items():
                sums.setdefault(agent, []).append(value)
        return {a: sum(v) / len(v) for a, v in sums.items()}


def _transcript_page(run: Path, episodes: _EpisodeFile, env_kwargs: Mapping[str, Any]) -> str:
    stem = episodes.path.stem
    count = len(episodes.records)
    body = [f'<p><a href="index.html">← the report</a> · {count} episode{"s" * (count != 1)}</p>']
    body += [f'<p class="note">{html.escape(p)}</p>' for p in episodes.problems]
    if not episodes.records:
        body.append('<p class="muted">This file holds no episodes.</p>')
    elif len(episodes.records) > 1:  # a table of contents: each episode and what it earned
        rows = []
        for i, (record, rewards) in enumerate(zip(episodes.records, episodes.rewards, strict=True)):
            earned = (
                ", ".join(f"{a} {_fmt(v)}" for a, v in rewards.total.items()) if rewards else ""
            )
            rows.append(
                f'<tr><td><a href="#e{i + 1}">{i + 1}</a></td>'
                f"<td>{html.escape(str(record.get('title', '')))}</td>"
                f"<td>{html.escape(earned)}</td></tr>"
            )
        body.append(
            "<table><tr><th>#</th><th>episode</th><th>reward per agent</th></tr>"
            + "".join(rows)
            + "</table>"
        )
    fragments = [
        episode_html(
            r,
            f"{r.get('env', '')} · {r.get('title', '')}",
            env_kwargs=env_kwargs,
            anchor=f"e{i + 1}",
        )
        for i, r in enumerate(episodes.records)
    ]
    return _page(f"{run.name} · {stem}", "\n".join(body) + "<hr>".join(fragments))
