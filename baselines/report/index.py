"""The report's front page (``index.html``) and :func:`write_report`, its entry point."""

from __future__ import annotations

import argparse
import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.report._common import COLOURS, Series, load_metrics
from baselines.report.evaluation import evaluation_html
from baselines.report.league import league_html
from baselines.report.markup import Markup, href, join, markup
from baselines.report.metrics import (
    GROUPS,
    RunCounts,
    about_equal,
    constant_series,
    evaluation_metrics,
    group_of,
    headline_metrics,
    is_training_row,
    metric_series,
    run_counts,
)
from baselines.report.rewards import episode_rewards
from baselines.report.svg import Curve, line_chart, sparkline
from baselines.report.transcripts import EpisodeFile, html_page, read_records, transcript_page
from baselines.run_directory import CONFIG_FILE, EPISODES_DIR, METRICS_FILE
from llm_envs.formatting import fmt as _fmt


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
    files: Sequence[EpisodeFile],
) -> Markup:
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
    items: list[str] = [join(" · ", (markup("{} <b>{}</b>", k, v) for k, v in facts if v))]
    items += counts.describe() if counts else []
    if files:
        episodes = sum(len(f.records) for f in files)
        items.append(f"{episodes} transcripts in {len(files)} files (below)")
    return markup(
        '<ul class="what">{}</ul>', join("", (markup("<li>{}</li>", i) for i in items if i))
    )


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


def _change_html(name: str, first: float, last: float) -> Markup:
    if about_equal(first, last):
        return Markup('<span class="flat">= flat</span>')
    word, arrow = ("up", "▲") if last > first else ("down", "▼")
    leaf = name.rsplit("/", 1)[-1]
    better = "up" if leaf in _BETTER_UP else "down" if leaf in _BETTER_DOWN else None
    if "/opponent/" in name:  # the fixed opponent's: neither way is the trained model's gain
        better = None
    css = "" if better is None else "good" if better == word else "bad"
    return markup('<span class="{}">{} {} {:+.4g}</span>', css, arrow, word, last - first)


def _headline_html(
    series: Mapping[str, Series], chosen: Sequence[tuple[str, str]], unit: str
) -> Markup:
    if not chosen:
        return Markup("")
    rows = []
    for name, meaning in chosen:
        xs, ys = series[name]
        rows.append(
            markup(
                "<tr>{}<td class='n'>{}</td><td class='n'>{}</td><td>{}</td><td>{}</td></tr>",
                _metric_cell(name, meaning),
                _fmt(ys[0]),
                _fmt(ys[-1]),
                _change_html(name, ys[0], ys[-1]),
                sparkline(xs, ys),
            )
        )
    return markup(
        "<h2>Training, per {}</h2><table class='headline'><tr><th>metric</th>"
        "<th>first</th><th>last</th><th>change</th><th>curve</th></tr>{}</table>",
        unit,
        join("", rows),
    )


def _metric_cell(name: str, meaning: str) -> Markup:
    """A table's first cell: the metric's name, and what it means below it."""
    return markup("<td><code>{}</code><br><span class='meaning'>{}</span></td>", name, meaning)


def _evaluation_html(
    series: Mapping[str, Series], chosen: Sequence[tuple[str, str]], unit: str
) -> Markup:
    if not chosen:
        return Markup("")
    at = sorted({x for name, _ in chosen for x in series[name][0]})
    shown = at if len(at) <= 6 else [at[0], at[-1]]
    head = join("", (markup("<th class='n'>{} {}</th>", unit, _fmt(x)) for x in shown))
    if len(shown) < len(at):
        head = markup(
            "<th class='n'>{0} {1}</th><th>…</th><th class='n'>{0} {2}</th>",
            unit,
            _fmt(at[0]),
            _fmt(at[-1]),
        )
    rows = []
    for name, meaning in chosen:
        values = dict(zip(*series[name], strict=True))
        cells = [
            markup("<td class='n'>{}</td>", _fmt(values[x]) if x in values else "") for x in shown
        ]
        if len(shown) < len(at):
            cells.insert(1, Markup("<td></td>"))
        ys = series[name][1]
        rows.append(
            markup(
                "<tr>{}{}<td>{}</td></tr>",
                _metric_cell(name, meaning),
                join("", cells),
                _change_html(name, ys[0], ys[-1]) if len(ys) > 1 else "",
            )
        )
    return markup(
        "<h2>Evaluation</h2><table class='evaluation'><tr><th>metric</th>{}"
        "<th>change</th></tr>{}</table>",
        head,
        join("", rows),
    )


def _reward_chart(
    series: Mapping[str, Series], training: Sequence[tuple[str, str]], unit: str
) -> Markup:
    """The training reward and the evaluation reward on one chart."""
    curves = []
    train = next((n for n, _ in training if n in ("env/all/reward/total", "reward")), None)
    if train:
        curves.append(Curve(f"training: {train}", *series[train]))
    evaluation = ("eval/reward/total", "eval/all/reward/total", "eval/final/reward")
    name = next((n for n in evaluation if n in series), None)
    if name:
        curves.append(Curve(f"evaluation: {name}", *series[name], COLOURS[1], True))
    return line_chart(curves, width=500, height=220, title=f"reward per {unit}")


def _majority_chart(series: Mapping[str, Series], unit: str) -> Markup:
    """The debate's correct answers beside the majority vote of answers given alone (a baseline)."""
    names = ("eval/solution_correct", "eval/majority_vote/correct", "eval/single_answer/correct")
    if names[1] not in series:
        return Markup("")
    shown = [name for name in names if name in series]
    curves = [Curve(name, *series[name], COLOURS[i], True) for i, name in enumerate(shown)]
    title = f"evaluation, correct per {unit}: the debate and the majority vote"
    return line_chart(curves, width=500, height=220, title=title)


def _training_pages(files: Sequence[EpisodeFile], pages: Sequence[str]) -> list[tuple[int, str]]:
    """(iteration, page) of each transcript file that holds training episodes, by iteration."""
    found = []
    for episodes, page in zip(files, pages, strict=True):
        iterations = [r.get("iteration") for r in episodes.records]
        numbers = [i for i in iterations if isinstance(i, int)]
        training = all(r.get("phase", "train") == "train" for r in episodes.records)
        if numbers and training:
            found.append((min(numbers), page))
    return sorted(found)


def _first_last_html(files: Sequence[EpisodeFile], pages: Sequence[str], unit: str) -> Markup:
    """Links to the first and the last training transcripts: what changed, one click away."""
    found = _training_pages(files, pages)
    if not found:
        return Markup("")
    (first, first_page), (last, last_page) = found[0], found[-1]
    links = [markup('<a href="{}">first {} ({})</a>', href(first_page), unit, first)]
    if last_page != first_page:
        links.append(markup('<a href="{}">last {} ({})</a>', href(last_page), unit, last))
    return markup("<p class='jump'>Transcripts: {}</p>", join(" · ", links))


def _config_html(config: Mapping[str, Any]) -> Markup:
    if not config:
        return Markup("")

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
                cells.append(markup("<td class='k'>{}</td><td class='v'>{}</td>", k, value(v)))
        rows.append(markup("<tr>{}</tr>", join("", cells)))
    return markup("<h2>Config</h2><table class='config'>{}</table>", join("", rows))


def _episodes_html(files: Sequence[EpisodeFile], pages: Sequence[str]) -> Markup:
    if not files:
        return Markup("")
    with_phase = any("phase" in r for f in files for r in f.records)
    rows = []
    for episodes, page in zip(files, pages, strict=True):
        iterations = sorted({str(r["iteration"]) for r in episodes.records if "iteration" in r})
        phases = sorted({str(r["phase"]) for r in episodes.records if "phase" in r})
        means = episodes.mean_rewards()
        overall = _fmt(sum(means.values()) / len(means)) if means else ""
        per_agent = ", ".join(f"{a} {_fmt(v)}" for a, v in means.items())
        rows.append(
            markup(
                '<tr><td><a href="{}">{}</a></td><td>{}</td>{}'
                "<td class='n'>{}</td><td class='n'>{}</td><td>{}</td></tr>",
                href(page),
                episodes.path.stem,
                ", ".join(iterations),
                markup("<td>{}</td>", ", ".join(phases)) if with_phase else "",
                len(episodes.records),
                overall,
                per_agent,
            )
        )
    phase = Markup("<th>phase</th>") if with_phase else ""
    return markup(
        "<h2>Transcripts</h2><table class='episodes'><tr><th>file</th><th>iteration</th>{}"
        "<th>episodes</th><th>mean reward</th><th>mean reward per agent</th></tr>{}</table>",
        phase,
        join("", rows),
    )


def _curves_html(series: Mapping[str, Series], constant: Mapping[str, float]) -> Markup:
    grouped: dict[str, list[str]] = {}
    for name in sorted(series):
        if name not in constant:
            grouped.setdefault(group_of(name), []).append(name)
    order = [g for g, _, _ in GROUPS] + ["other"]
    parts = []
    if grouped:
        parts.append(Markup("<h2>Every metric that changed</h2>"))
    for group in order:
        names = grouped.get(group, [])
        if not names:
            continue
        panels = join(
            "",
            (
                line_chart(
                    [Curve(name, *series[name], points_only=group == "evaluation")],
                    width=290,
                    height=150,
                    title=name,
                )
                for name in names
            ),
        )
        parts.append(
            markup(
                "<details open><summary><b>{}</b> ({} series)</summary>"
                "<div class='panels'>{}</div></details>",
                group,
                len(names),
                panels,
            )
        )
    if constant:
        rows = join(
            "",
            (
                markup(
                    "<tr><td><code>{}</code></td><td class='n'>{}</td><td class='n'>{}</td></tr>",
                    n,
                    _fmt(v),
                    len(series[n][1]),
                )
                for n, v in constant.items()
            ),
        )
        parts.append(
            markup(
                "<h2>Constant series</h2><details><summary>{0} constant series "
                "(the same value every time it was logged)</summary><table class='constant'>"
                "<tr><th>metric</th><th>value</th><th>times logged</th></tr>{1}</table>"
                "</details>",
                len(constant),
                rows,
            )
        )
    return join("\n", parts)


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
    stem, ``.html``; ``index.jsonl.html`` for ``index.jsonl``) are written to
    ``out_dir`` (default ``RUN_DIR/report``). Every field of every file is
    written as text (:mod:`baselines.report.markup`): a run's files may hold
    markup, never a script.

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
        records, problems = read_records(path)
        rewards = [episode_rewards(r, env_kwargs) for r in records]
        files.append(EpisodeFile(path, records, problems, rewards))
    pages = []
    for episodes in files:
        # An episode file named index.jsonl must not overwrite the front page.
        stem = episodes.path.stem
        page = out / (f"{stem}.html" if stem != "index" else "index.jsonl.html")
        page.write_text(
            transcript_page(run, episodes, env_kwargs), "utf-8", errors="backslashreplace"
        )
        pages.append(page.name)

    series = metric_series(rows)
    training_rows = [r for r in rows if is_training_row(r)]
    training_series = metric_series(training_rows)
    counts = run_counts(rows, config) if rows else None
    unit = counts.unit if counts else "iteration"
    headline = headline_metrics(training_series)
    evaluation = evaluation_metrics(series)
    body = [
        markup("<p class='muted'>Run: <code>{}</code></p>", str(run.resolve())),
        Markup("<div class='top'><div>"),
        _what_html(config, counts, set(series), files),
        *(markup('<p class="note">{}</p>', n) for n in notes),
        Markup("</div>"),
        _reward_chart(series, headline, unit),
        Markup("</div>"),
        evaluation_section,
        _headline_html(training_series, headline, unit),
        _first_last_html(files, pages, unit),
        _evaluation_html(series, evaluation, unit),
        _majority_chart(series, unit),
        league_html(series, unit, crossplay),  # with the final evaluation: a snapshot's meter
        _config_html(config),
        _episodes_html(files, pages),
        _curves_html(series, constant_series(series)),
    ]
    index = out / "index.html"
    index.write_text(
        html_page(f"Report: {run.name}", join("\n", (b for b in body if b))),
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
