"""The report's front page (``index.html``) and :func:`write_report`, its entry point."""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.report._common import _COLOURS, Series, load_metrics
from baselines.report.evaluation import evaluation_html
from baselines.report.league import league_html
from baselines.report.metrics import (
    _GROUPS,
    RunCounts,
    _group_of,
    _is_training_row,
    _same,
    constant_series,
    evaluation_metrics,
    headline_metrics,
    metric_series,
    run_counts,
)
from baselines.report.rewards import episode_rewards
from baselines.report.svg import _chart, _Curve, _sparkline
from baselines.report.transcripts import _EpisodeFile, _page, _read_records, _transcript_page
from baselines.run_directory import CONFIG_FILE, EPISODES_DIR, METRICS_FILE
from llm_envs.family import fmt as _fmt


def _read_config(path: Path) -> tuple[dict[str, Any], str | None]:
    if not path.exists():
        return {}, None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return {}, f"{path.name} is not readable JSON ({exc}): the config is not shown"
    if not isinstance(config, dict):
        return {}, f"{path.name} is not a JSON object: the config is not shown"
    return config, None


def _trainer(config: Mapping[str, Any], names: set[str]) -> str:
    if "models" in config and "seating" in config:
        return "evaluation (baselines.eval)"
    if "max_steps" in config or "num_generations" in config or {"reward", "loss"} <= names:
        return "TRL GRPO (baselines.grpo)"
    if "joint_mode" in config or any(re.match(r"env/turn_\d+/", n) for n in names):
        return "MAGRPO (baselines.magrpo)"
    if "groups_per_batch" in config or "optim/loss" in names:
        return "importance-sampling trainer (baselines.is_trainer)"
    return ""


def _what_html(
    config: Mapping[str, Any],
    counts: RunCounts | None,
    names: set[str],
    files: Sequence[_EpisodeFile],
) -> str:
    envs = sorted({str(r.get("env", "")) for f in files for r in f.records} - {""})
    env = str(config.get("env") or ", ".join(envs) or "")
    if "dataset" in config:
        env = f"{env or 'code_collab'} ({config['dataset']})"
    facts = [
        ("trainer", _trainer(config, names)),
        ("environment", env),
        ("model", str(config.get("model") or "")),
        ("models", ", ".join(map(str, config.get("models") or []))),
    ]
    items = [" · ".join(f"{k} <b>{html.escape(v)}</b>" for k, v in facts if v)]
    items += [html.escape(s) for s in counts.describe()] if counts else []
    if files:
        episodes = sum(len(f.records) for f in files)
        items.append(f"{episodes} transcripts in {len(files)} files (below)")
    return '<ul class="what">' + "".join(f"<li>{i}</li>" for i in items if i) + "</ul>"


# Which way is better, by the metric's last name segment: rewards and success rates up,
# parse errors down; anything else (loss, time...) is neither.
_BETTER_DOWN = ("parse_error",)
_BETTER_UP = (
    "reward",
    "total",
    "correct",
    "pass_rate",
    "solved",
    "consensus_reached",
    "voted",
    "vote_agreement",
    "pairwise_reward",
)


def _change_html(name: str, first: float, last: float) -> str:
    if _same(first, last):
        return '<span class="flat">= flat</span>'
    word, arrow = ("up", "▲") if last > first else ("down", "▼")
    leaf = name.rsplit("/", 1)[-1]
    better = "up" if leaf in _BETTER_UP else "down" if leaf in _BETTER_DOWN else None
    if "/opponent/" in name:  # the fixed opponent's: neither way is the trained model's gain
        better = None
    css = "" if better is None else "good" if better == word else "bad"
    return f'<span class="{css}">{arrow} {word} {last - first:+.4g}</span>'


def _headline_html(
    series: Mapping[str, Series], chosen: Sequence[tuple[str, str]], unit: str
) -> str:
    if not chosen:
        return ""
    rows = []
    for name, meaning in chosen:
        xs, ys = series[name]
        rows.append(
            f"<tr>{_metric_cell(name, meaning)}<td class='n'>{_fmt(ys[0])}</td>"
            f"<td class='n'>{_fmt(ys[-1])}</td><td>{_change_html(name, ys[0], ys[-1])}</td>"
            f"<td>{_sparkline(xs, ys)}</td></tr>"
        )
    return (
        f"<h2>Training, per {unit}</h2><table class='headline'><tr><th>metric</th>"
        f"<th>first</th><th>last</th><th>change</th><th>curve</th></tr>{''.join(rows)}</table>"
    )


def _metric_cell(name: str, meaning: str) -> str:
    """A table's first cell: the metric's name, and what it means below it."""
    return (
        f"<td><code>{html.escape(name)}</code><br>"
        f"<span class='meaning'>{html.escape(meaning)}</span></td>"
    )


def _evaluation_html(
    series: Mapping[str, Series], chosen: Sequence[tuple[str, str]], unit: str
) -> str:
    if not chosen:
        return ""
    at = sorted({x for name, _ in chosen for x in series[name][0]})
    shown = at if len(at) <= 6 else [at[0], at[-1]]
    head = "".join(f"<th class='n'>{unit} {_fmt(x)}</th>" for x in shown)
    if len(shown) < len(at):
        head = f"<th class='n'>{unit} {_fmt(at[0])}</th><th>…</th>"
        head += f"<th class='n'>{unit} {_fmt(at[-1])}</th>"
    rows = []
    for name, meaning in chosen:
        values = dict(zip(*series[name], strict=True))
        cells = [f"<td class='n'>{_fmt(values[x]) if x in values else ''}</td>" for x in shown]
        if len(shown) < len(at):
            cells.insert(1, "<td></td>")
        ys = series[name][1]
        rows.append(
            f"<tr>{_metric_cell(name, meaning)}{''.join(cells)}"
            f"<td>{_change_html(name, ys[0], ys[-1]) if len(ys) > 1 else ''}</td></tr>"
        )
    return (
        f"<h2>Evaluation</h2><table class='evaluation'><tr><th>metric</th>{head}"
        f"<th>change</th></tr>{''.join(rows)}</table>"
    )


def _reward_chart(
    series: Mapping[str, Series], training: Sequence[tuple[str, str]], unit: str
) -> str:
    """The training reward and the evaluation reward on one chart."""
    curves = []
    train = next((n for n, _ in training if n in ("env/all/reward/total", "reward")), None)
    if train:
        curves.append(_Curve(f"training: {train}", *series[train]))
    evaluation = ("eval/reward/total", "eval/all/reward/total", "eval/final/reward")
    name = next((n for n in evaluation if n in series), None)
    if name:
        curves.append(_Curve(f"evaluation: {name}", *series[name], _COLOURS[1], True))
    return _chart(curves, width=500, height=220, title=f"reward per {unit}") if curves else ""


def _training_pages(files: Sequence[_EpisodeFile], pages: Sequence[str]) -> list[tuple[int, str]]:
    """(iteration, page) of each transcript file that holds training episodes, by iteration."""
    found = []
    for episodes, page in zip(files, pages, strict=True):
        iterations = [r.get("iteration") for r in episodes.records]
        numbers = [i for i in iterations if isinstance(i, int)]
        training = all(r.get("phase", "train") == "train" for r in episodes.records)
        if numbers and training:
            found.append((min(numbers), page))
    return sorted(found)


def _first_last_html(files: Sequence[_EpisodeFile], pages: Sequence[str], unit: str) -> str:
    """Links to the first and the last training transcripts: what changed, one click away."""
    found = _training_pages(files, pages)
    if not found:
        return ""
    (first, first_page), (last, last_page) = found[0], found[-1]
    links = [f'<a href="{first_page}">first {unit} ({first})</a>']
    if last_page != first_page:
        links.append(f'<a href="{last_page}">last {unit} ({last})</a>')
    return f"<p class='jump'>Transcripts: {' · '.join(links)}</p>"


def _config_html(config: Mapping[str, Any]) -> str:
    if not config:
        return ""

    def value(v: Any) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{k}={json.dumps(x)}" for k, x in v.items()) or "{}"
        return v if isinstance(v, str) else json.dumps(v)

    items = list(config.items())
    columns = 3 if len(items) > 12 else 1
    height = math.ceil(len(items) / columns)
    rows = []
    for r in range(height):
        cells = []
        for c in range(columns):
            i = c * height + r
            if i < len(items):
                k, v = items[i]
                cells.append(
                    f"<td class='k'>{html.escape(k)}</td><td class='v'>{html.escape(value(v))}</td>"
                )
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<h2>Config</h2><table class='config'>{''.join(rows)}</table>"


def _episodes_html(files: Sequence[_EpisodeFile], pages: Sequence[str]) -> str:
    if not files:
        return ""
    with_phase = any("phase" in r for f in files for r in f.records)
    rows = []
    for episodes, page in zip(files, pages, strict=True):
        iterations = sorted({str(r["iteration"]) for r in episodes.records if "iteration" in r})
        phases = sorted({str(r["phase"]) for r in episodes.records if "phase" in r})
        means = episodes.mean_rewards()
        overall = _fmt(sum(means.values()) / len(means)) if means else ""
        per_agent = ", ".join(f"{a} {_fmt(v)}" for a, v in means.items())
        rows.append(
            f'<tr><td><a href="{page}">{html.escape(episodes.path.stem)}</a></td>'
            f"<td>{', '.join(iterations)}</td>"
            + (f"<td>{', '.join(phases)}</td>" if with_phase else "")
            + f"<td class='n'>{len(episodes.records)}</td><td class='n'>{overall}</td>"
            f"<td>{html.escape(per_agent)}</td></tr>"
        )
    phase = "<th>phase</th>" if with_phase else ""
    return (
        f"<h2>Transcripts</h2><table class='episodes'><tr><th>file</th><th>iteration</th>{phase}"
        "<th>episodes</th><th>mean reward</th><th>mean reward per agent</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _curves_html(series: Mapping[str, Series], constant: Mapping[str, float]) -> str:
    grouped: dict[str, list[str]] = {}
    for name in sorted(series):
        if name not in constant:
            grouped.setdefault(_group_of(name), []).append(name)
    order = [g for g, _, _ in _GROUPS] + ["other"]
    parts = []
    if grouped:
        parts.append("<h2>Every metric that changed</h2>")
    for group in order:
        names = grouped.get(group, [])
        if not names:
            continue
        panels = "".join(
            _chart(
                [_Curve(name, *series[name], points_only=group == "evaluation")],
                width=290,
                height=150,
                title=name,
            )
            for name in names
        )
        parts.append(
            f"<details open><summary><b>{group}</b> ({len(names)} series)</summary>"
            f"<div class='panels'>{panels}</div></details>"
        )
    if constant:
        rows = "".join(
            f"<tr><td><code>{html.escape(n)}</code></td><td class='n'>{_fmt(v)}</td>"
            f"<td class='n'>{len(series[n][1])}</td></tr>"
            for n, v in constant.items()
        )
        parts.append(
            f"<h2>Constant series</h2><details><summary>{len(constant)} constant series "
            "(the same value every time it was logged)</summary><table class='constant'>"
            f"<tr><th>metric</th><th>value</th><th>times logged</th></tr>{rows}</table></details>"
        )
    return "\n".join(parts)


def _read_rows(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The metric lines, and a note per warning (a torn last line), warned again."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = load_metrics(path)
    notes = [str(w.message) for w in caught]
    for note in notes:
        warnings.warn(note, stacklevel=3)
    return rows, notes


def write_report(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Build the report of a run directory; return the path of its ``index.html``.

    ``index.html`` and one transcript page per ``episodes/*.jsonl`` file (same
    stem, ``.html``) are written to ``out_dir`` (default ``RUN_DIR/report``).

    Raises:
        FileNotFoundError: if the run directory has neither metrics nor episodes.
        ValueError: a line of ``metrics.jsonl`` other than the last is broken.
    """
    run = Path(run_dir)
    out = Path(out_dir) if out_dir is not None else run / "report"
    metrics_path = run / METRICS_FILE
    episode_paths = sorted((run / EPISODES_DIR).glob("*.jsonl"))
    if not metrics_path.exists() and not episode_paths:
        raise FileNotFoundError(
            f"{run} has no {METRICS_FILE} and no {EPISODES_DIR}/*.jsonl: point at the output "
            "directory of a training run (its --output-dir)"
        )
    out.mkdir(parents=True, exist_ok=True)
    config, config_note = _read_config(run / CONFIG_FILE)
    env_kwargs = config.get("env_kwargs")
    env_kwargs = env_kwargs if isinstance(env_kwargs, dict) else {}
    notes = [config_note] if config_note else []

    evaluation_section, evaluation_notes = evaluation_html(run)
    notes += evaluation_notes
    # A league run's snapshots rated after the fact (docs/league.md): RUN/league/eval.
    crossplay, crossplay_notes = evaluation_html(run / "league" / "eval")
    notes += crossplay_notes
    rows: list[dict[str, Any]] = []
    if metrics_path.exists():
        rows, torn = _read_rows(metrics_path)
        notes += torn
        if not rows:
            notes.append(f"{METRICS_FILE} holds no metric line yet: no iteration finished")
    elif not evaluation_section:  # an evaluation's folder has no metrics log
        notes.append(f"no {METRICS_FILE}: only the transcripts are shown")

    files = []
    for path in episode_paths:
        records, problems = _read_records(path)
        rewards = [episode_rewards(r, env_kwargs) for r in records]
        files.append(_EpisodeFile(path, records, problems, rewards))
    pages = []
    for episodes in files:
        page = out / f"{episodes.path.stem}.html"
        page.write_text(
            _transcript_page(run, episodes, env_kwargs), "utf-8", errors="backslashreplace"
        )
        pages.append(page.name)

    series = metric_series(rows)
    training_rows = [r for r in rows if _is_training_row(r)]
    training_series = metric_series(training_rows)
    counts = run_counts(rows, config) if rows else None
    unit = counts.unit if counts else "iteration"
    headline = headline_metrics(training_series)
    evaluation = evaluation_metrics(series)
    body = [
        f"<p class='muted'>Run: <code>{html.escape(str(run.resolve()))}</code></p>",
        "<div class='top'><div>",
        _what_html(config, counts, set(series), files),
        *(f'<p class="note">{html.escape(n)}</p>' for n in notes),
        "</div>",
        _reward_chart(series, headline, unit),
        "</div>",
        evaluation_section,
        _headline_html(training_series, headline, unit),
        _first_last_html(files, pages, unit),
        _evaluation_html(series, evaluation, unit),
        league_html(training_series, unit, crossplay),
        _config_html(config),
        _episodes_html(files, pages),
        _curves_html(series, constant_series(series)),
    ]
    index = out / "index.html"
    index.write_text(
        _page(f"Report: {run.name}", "\n".join(b for b in body if b)),
        "utf-8",
        errors="backslashreplace",
    )
    return index


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``python -m baselines.report RUN_DIR [--out DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m baselines.report",
        description="What a training run did: headline metrics, curves and transcripts.",
    )
    parser.add_argument("run_dir", help="the run's output directory")
    parser.add_argument("--out", default=None, help="where to write (default RUN_DIR/report)")
    args = parser.parse_args(argv)
    print(write_report(args.run_dir, args.out))
