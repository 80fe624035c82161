"""Transcript pages: per episode, each agent's reward, then its turns."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baselines.report._common import STYLE
from baselines.report.markup import Markup, escape, href, join, markup
from baselines.report.rewards import EpisodeRewards, episode_rewards
from llm_envs.formatting import fmt as _fmt


def _is_chat(value: Any) -> bool:
    """A list of ``{"role", "content"}`` messages (a prompt, or a training context)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in value)
    )


def _chat_html(messages: Sequence[Mapping[str, Any]]) -> Markup:
    return join(
        "",
        (
            markup("<b>{}</b><pre>{}</pre>", str(m.get("role", "")), str(m.get("content", "")))
            for m in messages
        ),
    )


def _value_html(value: Any) -> Markup:
    if _is_chat(value):
        return markup(
            "<details><summary>{} messages</summary>{}</details>", len(value), _chat_html(value)
        )
    if isinstance(value, str):
        return markup("<pre>{}</pre>", value) if "\n" in value or len(value) > 80 else escape(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return join(Markup("<br>"), value) or Markup("<i>none</i>")
    if isinstance(value, float):
        return escape(_fmt(value))
    return escape(json.dumps(value, ensure_ascii=False))


def _table(mapping: Mapping[str, Any], css: str) -> Markup:
    rows = join(
        "",
        (
            markup("<tr><td>{}</td><td>{}</td></tr>", str(k), _value_html(v))
            for k, v in mapping.items()
            if v is not None
        ),
    )
    return markup('<table class="{}">{}</table>', css, rows)


#: A raw output longer than this shows its first lines, the whole text one click away.
_OUTPUT_LINES, _OUTPUT_CHARS = 60, 6000
_PREVIEW_LINES, _PREVIEW_CHARS = 25, 2500


def _output_html(text: str) -> Markup:
    """The model's raw output, shown; a very long one is cut, the whole text under a click."""
    lines = text.splitlines()
    label = markup('<div class="label">raw output ({} characters)</div>', len(text))
    if not text:
        return label + Markup('<p class="muted">(empty)</p>')
    if len(lines) <= _OUTPUT_LINES and len(text) <= _OUTPUT_CHARS:
        return label + markup('<pre class="output">{}</pre>', text)
    preview = "\n".join(lines[:_PREVIEW_LINES])[:_PREVIEW_CHARS]
    return label + markup(
        '<pre class="output">{}\n…</pre>'
        "<details><summary>the whole output ({} lines)</summary>"
        '<pre class="output">{}</pre></details>',
        preview,
        len(lines),
        text,
    )


def _rewards_html(rewards: EpisodeRewards | None) -> Markup:
    if rewards is None:
        return Markup('<p class="muted">This record does not say what each agent earned.</p>')
    rows = join(
        "",
        (
            markup(
                '<tr><td class="agent">{}</td><td class="n">{}</td><td>{}</td></tr>',
                agent,
                _fmt(value),
                rewards.how.get(agent, ""),
            )
            for agent, value in rewards.total.items()
        ),
    )
    return markup(
        '<table class="rewards"><tr><th>agent</th><th>reward</th><th>from</th></tr>{}</table>',
        rows,
    )


def _turn_html(turn: Mapping[str, Any], gain: str | None) -> Markup:
    details = dict(turn.get("details") or {})
    error = details.pop("parse_error", None) or details.pop("error", None)
    prompt = turn.get("prompt") or []
    error_html = markup('<p class="error-text">{}</p>', str(error)) if error else Markup("")
    gain_html = markup('<span class="gain">{}</span>', gain) if gain else Markup("")
    return markup(
        '<div class="turn{}"><div class="head"><span class="agent">{}</span>{}</div>{}{}{}'
        "<details><summary>prompt ({} messages)</summary>{}</details></div>",
        " error" if error else "",
        str(turn.get("agent", "?")),
        gain_html,
        error_html,
        _output_html(str(turn.get("text", ""))),
        _table(details, "fields"),
        len(prompt),
        _chat_html(prompt),
    )


def episode_html(
    record: Mapping[str, Any],
    heading: str = "",
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    anchor: str = "",
) -> Markup:
    """One episode as an HTML fragment, every field of the record escaped.

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
    anchor_html = markup('<a id="{}"></a>', anchor) if anchor else Markup("")
    parts = [
        markup("{}<h2>{}</h2>", anchor_html, heading or str(record.get("title", "episode"))),
        _rewards_html(rewards),
        _table(record.get("summary") or {}, "summary"),
    ]
    current_round = None
    for turn in record.get("turns") or []:
        if turn.get("round") != current_round:
            current_round = turn.get("round")
            parts.append(markup("<h3>Round {}</h3>", str(current_round)))
        gain = rewards.per_turn.get((turn.get("round"), turn.get("agent"))) if rewards else None
        parts.append(_turn_html(turn, gain))
    return join("\n", parts)


def html_page(title: str, body: Markup) -> Markup:
    """A whole page: ``title`` is text; ``body`` is markup, so it went through the helper."""
    return markup(
        "<!doctype html><html><head><meta charset='utf-8'><title>{0}</title>{1}</head>"
        "<body><h1>{0}</h1>{2}</body></html>",
        title,
        STYLE,
        body,
    )


def read_records(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
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
class EpisodeFile:
    """A transcript file and its records."""

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


def transcript_page(run: Path, episodes: EpisodeFile, env_kwargs: Mapping[str, Any]) -> Markup:
    """The transcript page of an episodes file."""
    stem = episodes.path.stem
    count = len(episodes.records)
    body = [
        markup(
            '<p><a href="{}">← the report</a> · {} episode{}</p>',
            href("index.html"),
            count,
            "s" * (count != 1),
        )
    ]
    body += [markup('<p class="note">{}</p>', p) for p in episodes.problems]
    if not episodes.records:
        body.append(Markup('<p class="muted">This file holds no episodes.</p>'))
    elif len(episodes.records) > 1:  # a table of contents: each episode and what it earned
        rows = []
        for i, (record, rewards) in enumerate(zip(episodes.records, episodes.rewards, strict=True)):
            earned = (
                ", ".join(f"{a} {_fmt(v)}" for a, v in rewards.total.items()) if rewards else ""
            )
            rows.append(
                markup(
                    '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td></tr>',
                    href("", f"e{i + 1}"),
                    i + 1,
                    str(record.get("title", "")),
                    earned,
                )
            )
        body.append(
            markup(
                "<table><tr><th>#</th><th>episode</th><th>reward per agent</th></tr>{}</table>",
                join("", rows),
            )
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
    return html_page(f"{run.name} · {stem}", join("\n", body) + join(Markup("<hr>"), fragments))
