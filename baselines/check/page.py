"""The check's page (``index.html``, in the report's style) and its numbers (``check.json``).

Every value on the page is escaped (:mod:`baselines.report.markup`): a family,
its settings and its players' names come from anyone's package. The JSON
holds finite numbers only (a NaN is written as null), so any JSON reader
takes it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Final

from baselines.check.checks import CheckResult
from baselines.check.run import CheckReport
from baselines.report.markup import Markup, join, markup

__all__ = ["MEANINGS", "PAGE_FILE", "RESULTS_FILE", "report_json", "write_page"]

PAGE_FILE: Final = "index.html"
RESULTS_FILE: Final = "check.json"

MEANINGS: Final = {
    "conformance": "PettingZoo's api and seed tests and llm-envs' contract checks on the family's "
    "training environment and its registered PettingZoo ids",
    "reference": "the mean return of the reference player in the measured seats of the evaluation "
    "plan, against the empty answer's and random text's: a reward that pays for nothing, or fails "
    "to pay the known answer, fails here",
    "stable_under_load": "the reference episodes replayed all at once beside CPU-burning processes "
    "pay what they paid alone: a verdict that depends on the machine's load (a timeout) fails here",
    "reward_variance": "the share of training groups whose rewards are not all equal, each seat "
    "played by one of the family's players, the empty answer or random text: a group of equal "
    "rewards has no advantage to learn from",
    "determinism": "two plays of one seeded training group with fresh players are identical: "
    "turns, rewards, infos and records",
    "judge": "the judges' agreement with the reference answer and their share of strict votes for "
    "the lower seat (0.5: no position bias)",
    "reward_variance[model]": "the same share with the model in every seat",
    "judge[model]": "the model as the judge",
    "reward_range": "every return seen is finite and inside the family's declared reward_range",
    "step_time": "the environments' mean time per reset or step, players excluded",
}
"""What each check measures, in words (the page's last column; docs/check.md says more)."""

# The report's look (baselines/report): system font, thin rules, green and red verdicts.
_STYLE = Markup("""<style>
body { font-family: system-ui, sans-serif; margin: 1.2rem 2rem; max-width: 1200px; color: #222;
       font-size: 15px; }
h1 { font-size: 1.5rem; margin: 0 0 0.3rem; font-weight: 600; }
h2 { font-size: 1.2rem; margin: 1.4rem 0 0.4rem; font-weight: 600; }
table { border-collapse: collapse; }
td, th { padding: 2px 10px; vertical-align: top; border-bottom: 1px solid #eee; text-align: left; }
th { color: #555; font-weight: 600; border-bottom: 1px solid #ccc; }
td.k { color: #555; white-space: nowrap; }
.meaning { color: #666; font-size: 0.85em; }
.good { color: #2b8a3e; font-weight: 600; } .bad { color: #c92a2a; font-weight: 600; }
.flat { color: #777; font-weight: 600; } .muted { color: #777; }
pre { white-space: pre-wrap; word-wrap: break-word; background: #f7f7f7; padding: 0.5rem;
      border-radius: 4px; font-size: 0.85rem; }
</style>""")

_CLASS = {"PASS": "good", "FAIL": "bad", "SKIP": "flat"}


def finite_json(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (strict JSON).

    Example:
        >>> finite_json({"a": [1.0, float("nan")], "b": float("inf")})
        {'a': [1.0, None], 'b': None}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def report_json(report: CheckReport) -> dict[str, Any]:
    """The report as JSON values: ``check.json``."""
    return finite_json(
        {
            "family": report.family,
            "passed": not report.failed,
            "seconds": report.seconds,
            "players": report.players,
            "config": report.config,
            "results": [
                {"name": r.name, "status": r.status, "summary": r.summary, "numbers": r.numbers}
                for r in report.results
            ],
        }
    )


def _row(result: CheckResult) -> Markup:
    return markup(
        '<tr><td class="{}">{}</td><td>{}</td><td>{}</td><td class="meaning">{}</td></tr>',
        _CLASS[result.status],
        result.status,
        result.name,
        result.summary,
        MEANINGS.get(result.name, ""),
    )


def page_html(report: CheckReport) -> Markup:
    """The page: the verdict, one row per check, the settings."""
    counts = {s: sum(r.status == s for r in report.results) for s in ("PASS", "FAIL", "SKIP")}
    verdict = "failed" if report.failed else "passed"
    settings = join(
        "",
        (
            markup('<tr><td class="k">{}</td><td>{}</td></tr>', key, json.dumps(value))
            for key, value in report.config.items()
        ),
    )
    return markup(
        "<!doctype html><html><head><meta charset='utf-8'><title>check: {}</title>{}</head><body>"
        "<h1>llm-envs check: {}</h1>"
        '<p><span class="{}">{}</span>: {} passed, {} failed, {} skipped, in {} s. '
        '<span class="muted">Players: {}.</span></p>'
        "<table><tr><th>status</th><th>check</th><th>measured</th><th>what it means</th></tr>"
        "{}</table>"
        "<h2>Settings</h2><table>{}</table>"
        '<p class="muted">The numbers: {}.</p></body></html>',
        report.family,
        _STYLE,
        report.family,
        "bad" if report.failed else "good",
        verdict,
        counts["PASS"],
        counts["FAIL"],
        counts["SKIP"],
        f"{report.seconds:.0f}",
        ", ".join(report.players) or "none",
        join("", (_row(r) for r in report.results)),
        settings,
        RESULTS_FILE,
    )


def write_page(report: CheckReport, folder: Path) -> Path:
    """Write ``index.html`` and ``check.json`` into ``folder``; return the page's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RESULTS_FILE).write_text(
        json.dumps(report_json(report), indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    page = folder / PAGE_FILE
    page.write_text(page_html(report), encoding="utf-8")
    return page
