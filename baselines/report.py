"""Reports people look at: metric curves as PNG plots and an HTML transcript viewer.

    python -m baselines.report RUN_DIR [--out RUN_DIR/report]

A run directory holds ``metrics.jsonl`` (one JSON object per iteration, with an
``iteration`` key and flat metric names such as ``env/all/reward/total``) and
``episodes/*.jsonl`` (one :class:`~llm_envs.records.EpisodeRecord` per line,
each with the ``iteration`` it was sampled at). The report is a folder with
one PNG per metric group (a panel per metric), ``index.html`` (the plots and a list of episodes)
and one HTML page per episode file: per round and per agent, the prompt it was
shown, what the environment read from its answer (parsed fields, votes, parse
errors, test results, feedback), and its raw output.

The pages are static HTML with no scripts or external assets: they open from
disk and can be attached to an issue.
"""

from __future__ import annotations

import argparse
import html
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.run_directory import EPISODES_DIR, METRICS_FILE, read_metrics

__all__ = [
    "EPISODES_DIR",
    "METRICS_FILE",
    "episode_html",
    "first_and_last",
    "load_metrics",
    "main",
    "plot_metrics",
    "write_report",
]

# Which metrics share a figure: the first matching prefix wins; the rest go to "other".
_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward", ("env/all/reward", "reward")),
    ("eval", ("eval/",)),
    ("env", ("env/",)),
    ("optim", ("optim/", "loss")),
    ("tokens", ("tokens/", "env/all/ac_tokens", "env/all/ob_tokens")),
    ("time", ("time/",)),
)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; max-width: 1100px; color: #222; }
h1, h2, h3 { font-weight: 600; }
.summary td, .fields td { padding: 2px 10px; vertical-align: top; border-bottom: 1px solid #eee; }
.fields td:first-child, .summary td:first-child { color: #555; white-space: nowrap; }
.turn { border: 1px solid #ddd; border-radius: 6px; margin: 0.8rem 0; padding: 0.6rem 1rem; }
.turn.error { border-color: #d33; background: #fff6f6; }
.agent { font-weight: 600; }
.error-text { color: #b00; font-weight: 600; }
pre { white-space: pre-wrap; word-wrap: break-word; background: #f7f7f7; padding: 0.5rem;
      border-radius: 4px; font-size: 0.85rem; }
details summary { cursor: pointer; color: #246; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5rem 0; }
"""


load_metrics = read_metrics
"""Read a ``metrics.jsonl`` file: :func:`baselines.run_directory.read_metrics`."""


def first_and_last(rows: Sequence[Mapping[str, Any]], key: str) -> str:
    """``"0.250 -> 0.500"``: a metric's first and last finite values in ``rows``.

    ``"not logged"`` when no row has a finite value for ``key``.

    Example:
        >>> first_and_last([{"r": 0.25}, {}, {"r": float("nan")}, {"r": 0.5}], "r")
        '0.250 -> 0.500'
    """
    values = [
        float(row[key])
        for row in rows
        if isinstance(row.get(key), int | float)
        and not isinstance(row[key], bool)
        and math.isfinite(row[key])
    ]
    return f"{values[0]:.3f} -> {values[-1]:.3f}" if values else "not logged"


def _group_of(name: str) -> str:
    for group, prefixes in _GROUPS:
        if name.startswith(prefixes):
            return group
    return "other"


#: Panels per figure row, and most panels per figure (a larger group is split).
_PANEL_COLUMNS = 4
_PANELS_PER_FIGURE = 32


def plot_metrics(rows: Sequence[Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    """Write the metric curves as PNG files: one per group, one small panel per metric.

    Groups, in order: ``reward``, ``eval``, ``env``, ``optim``, ``tokens``,
    ``time`` and ``other`` (see ``_GROUPS``). A panel is titled with its
    metric's full name and has its own y scale, so a metric near 0 is not
    flattened by one near 100. A group of more than 32 metrics is split over
    ``{group}.png``, ``{group}_2.png``...

    Returns:
        The written files, in group order.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    series: dict[str, dict[str, tuple[list[float], list[float]]]] = defaultdict(dict)
    for i, row in enumerate(rows):
        x = float(row.get("iteration", i))
        for name, value in row.items():
            if name == "iteration" or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if not math.isfinite(value):
                continue
            xs, ys = series[_group_of(name)].setdefault(name, ([], []))
            xs.append(x)
            ys.append(float(value))
    written = []
    for group in [g for g, _ in _GROUPS] + ["other"]:
        names = sorted(series.get(group, {}))
        for page, first in enumerate(range(0, len(names), _PANELS_PER_FIGURE)):
            chunk = names[first : first + _PANELS_PER_FIGURE]
            columns = min(_PANEL_COLUMNS, len(chunk))
            lines = math.ceil(len(chunk) / columns)
            fig, axes = plt.subplots(
                lines,
                columns,
                figsize=(3.3 * columns, 0.4 + 2.3 * lines),
                squeeze=False,
                layout="constrained",
            )
            for ax, name in zip(axes.flat, chunk, strict=False):
                xs, ys = series[group][name]
                ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3)
                ax.set_title(name, fontsize=8)
                ax.tick_params(labelsize=7)
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # iterations
                ax.grid(alpha=0.3)
            for ax in list(axes.flat)[len(chunk) :]:
                ax.set_visible(False)
            for ax in axes[-1]:
                ax.set_xlabel("iteration", fontsize=7)
            suffix = f"_{page + 1}" if page else ""
            fig.suptitle(group + (f" ({page + 1})" if page else ""), fontsize=11)
            path = out / f"{group}{suffix}.png"
            fig.savefig(path, dpi=100)
            plt.close(fig)
            written.append(path)
    return written


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
        return f"{value:.4g}"
    return html.escape(json.dumps(value, ensure_ascii=False))


def _table(mapping: Mapping[str, Any], css: str) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{_value_html(v)}</td></tr>"
        for k, v in mapping.items()
        if v is not None
    )
    return f'<table class="{css}">{rows}</table>'


def episode_html(record: Mapping[str, Any], heading: str = "") -> str:
    """Render one episode record as an HTML fragment (rounds, agents, prompts, fields, output)."""
    parts = [f"<h2>{html.escape(heading or str(record.get('title', 'episode')))}</h2>"]
    parts.append(_table(record.get("summary", {}), "summary"))
    current_round = None
    for turn in record.get("turns", []):
        if turn.get("round") != current_round:
            current_round = turn.get("round")
            parts.append(f"<h3>Round {html.escape(str(current_round))}</h3>")
        details = dict(turn.get("details", {}))
        error = details.pop("parse_error", None) or details.pop("error", None)
        prompt = _chat_html(turn.get("prompt", []))
        error_html = f'<p class="error-text">{html.escape(str(error))}</p>' if error else ""
        parts.append(
            f'<div class="turn{" error" if error else ""}">'
            f'<span class="agent">{html.escape(str(turn.get("agent", "?")))}</span>'
            f"{error_html}"
            f"<details><summary>prompt ({len(turn.get('prompt', []))} messages)</summary>"
            f"{prompt}</details>"
            f"{_table(details, 'fields')}"
            f"<details><summary>raw output</summary><pre>{html.escape(turn.get('text', ''))}"
            "</pre></details></div>"
        )
    return "\n".join(parts)


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def _read_records(path: Path) -> Iterable[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def write_report(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Build the report of a run directory; return the path of its ``index.html``.

    Raises:
        FileNotFoundError: if the run directory has neither metrics nor episodes.
    """
    run = Path(run_dir)
    out = Path(out_dir) if out_dir is not None else run / "report"
    metrics_path = run / METRICS_FILE
    episode_files = sorted((run / EPISODES_DIR).glob("*.jsonl"))
    if not metrics_path.exists() and not episode_files:
        raise FileNotFoundError(
            f"{run} has no {METRICS_FILE} and no {EPISODES_DIR}/*.jsonl: point at the output "
            "directory of a training run (its --output-dir)"
        )
    out.mkdir(parents=True, exist_ok=True)
    body = [f"<p>Run: <code>{html.escape(str(run.resolve()))}</code></p>"]
    if metrics_path.exists():
        rows = load_metrics(metrics_path)
        body.append(f"<h2>Metrics ({len(rows)} iterations)</h2>")
        for png in plot_metrics(rows, out):
            body.append(f'<img src="{png.name}" alt="{png.stem}">')
        if rows:
            body.append("<h3>Last iteration</h3>" + _table(rows[-1], "summary"))
    if episode_files:
        body.append("<h2>Episodes</h2><ul>")
        for path in episode_files:
            records = list(_read_records(path))
            page = out / f"{path.stem}.html"
            fragments = [
                episode_html(r, f"{r.get('env', '')} · {r.get('title', '')}") for r in records
            ]
            page.write_text(_page(f"{run.name} · {path.stem}", "<hr>".join(fragments)), "utf-8")
            body.append(
                f'<li><a href="{page.name}">{html.escape(path.stem)}</a> '
                f"({len(records)} episodes)</li>"
            )
        body.append("</ul>")
    index = out / "index.html"
    index.write_text(_page(f"Report: {run.name}", "\n".join(body)), "utf-8")
    return index


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``python -m baselines.report RUN_DIR [--out DIR]``."""
    parser = argparse.ArgumentParser(description="Plots and transcript pages for a training run.")
    parser.add_argument("run_dir", help="the run's output directory")
    parser.add_argument("--out", default=None, help="where to write (default RUN_DIR/report)")
    args = parser.parse_args(argv)
    print(write_report(args.run_dir, args.out))


if __name__ == "__main__":
    main()
