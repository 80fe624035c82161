"""Pieces every page of the report shares: the style sheet, colours, number formats."""

from __future__ import annotations

from baselines.report.markup import Markup
from baselines.run_directory import read_metrics

# The style sheet of every page, with its tags: the report's own markup, not a field.
STYLE = Markup("""<style>
body { font-family: system-ui, sans-serif; margin: 1.2rem 2rem; max-width: 1200px; color: #222;
       font-size: 15px; }
h1 { font-size: 1.5rem; margin: 0 0 0.3rem; } h2 { font-size: 1.2rem; margin: 1.4rem 0 0.4rem; }
h3 { font-size: 1rem; margin: 1rem 0 0.3rem; } h1, h2, h3 { font-weight: 600; }
table { border-collapse: collapse; }
td, th { padding: 2px 10px; vertical-align: top; border-bottom: 1px solid #eee; text-align: left; }
th { color: #555; font-weight: 600; border-bottom: 1px solid #ccc; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.fields td:first-child, .summary td:first-child, .config td.k { color: #555; white-space: nowrap; }
.config td.v { min-width: 9rem; max-width: 16rem; overflow-wrap: anywhere; padding-right: 24px; }
.what { margin: 0.3rem 0 0.8rem; padding-left: 1.2rem; } .what li { margin: 2px 0; }
.meaning { color: #666; font-size: 0.85em; }
.good { color: #2b8a3e; } .bad { color: #c92a2a; } .flat { color: #777; }
.top { display: flex; flex-wrap: wrap; gap: 0 2rem; align-items: flex-start; }
.top > div { flex: 1 1 420px; min-width: 0; } .top > svg { flex: 0 0 auto; }
.note { color: #8a5a00; } .muted { color: #777; } .jump { font-size: 1.05em; }
.panels { display: flex; flex-wrap: wrap; gap: 6px; }
svg text { font: 10px system-ui, sans-serif; fill: #444; } svg .t { font-size: 11px; fill: #222; }
svg .g { stroke: #eee; } svg .a { stroke: #bbb; }
.turn { border: 1px solid #ddd; border-radius: 6px; margin: 0.6rem 0; padding: 0.5rem 1rem; }
.turn.error { border-color: #d33; background: #fff6f6; }
.head { margin-bottom: 0.3rem; } .agent { font-weight: 600; }
.gain { margin-left: 0.8rem; font-weight: 600; color: #1f4e79; }
.error-text { color: #b00; font-weight: 600; }
.label { color: #555; font-size: 0.8rem; margin-top: 0.4rem; }
pre { white-space: pre-wrap; word-wrap: break-word; background: #f7f7f7; padding: 0.5rem;
      border-radius: 4px; font-size: 0.85rem; margin: 0.2rem 0; }
pre.output { background: #eef4fb; }
details summary { cursor: pointer; color: #246; }
table.rewards { margin: 0.3rem 0 0.6rem; } table.rewards td.n { font-weight: 600; }
</style>""")

# Curve colours: training, evaluation, then more evaluations.
COLOURS = ("#1f6fb2", "#d9480f", "#2b8a3e", "#7048e8")

load_metrics = read_metrics
"""Read a ``metrics.jsonl`` file: :func:`baselines.run_directory.read_metrics`."""

Series = tuple[list[float], list[float]]
"""A metric's iterations and values, in the order they were logged."""
