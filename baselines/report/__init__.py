"""The report of a run: what it did first, then its metric curves and its transcripts.

    python -m baselines.report RUN_DIR [--out RUN_DIR/report]

A run directory (see :mod:`baselines.run_directory`) holds ``config.json``,
``metrics.jsonl`` (one JSON object per line, each with an ``iteration``) and
``episodes/*.jsonl`` (one :class:`~llm_envs.records.EpisodeRecord` per line).
The report is a folder with ``index.html`` and one transcript page per episode
file. ``index.html`` opens with what the run did:

* the trainer, the environment, the model; how many training iterations (TRL:
  steps) were logged and when the policy was evaluated (the final evaluation,
  logged at ``iteration == num_iterations``, is not a training iteration);
* the headline metrics (training reward, success rates, loss...), each with its
  first and last value, its change and a small curve;
* the evaluations, one column per evaluation;
* the config, as a table; the transcript files, with each agent's mean reward.

Below: a curve per metric, grouped (reward, evaluation, environment,
optimization, data and tokens, time), and the series that never changed,
folded away with their value. A transcript page shows, per episode, what each
agent earned (see :func:`episode_rewards`), then per round and agent the
prompt it was shown (folded), what the environment read from its answer and its
raw output.

Every page is one static HTML file: curves are inline SVG, there are no
scripts, no images beside it and nothing fetched when it opens, so a page can be
attached to an issue. Nothing here imports torch or matplotlib. A run's files
are not trusted: every field they hold (a record's text, iteration or agent
name, a metric's name, an entrant's, a file's) is written as text, through one
helper (:mod:`~baselines.report.markup`), so a file that holds ``<script>``
shows it and runs nothing.

The modules: :mod:`~baselines.report.metrics` (series, counts, headline
choice), :mod:`~baselines.report.svg` (charts), :mod:`~baselines.report.rewards`
(what each agent earned), :mod:`~baselines.report.transcripts` (episode pages),
:mod:`~baselines.report.index` (the front page and :func:`write_report`) and
:mod:`~baselines.report.markup` (the HTML every page is built with).
"""

from __future__ import annotations

from baselines.report._common import Series, load_metrics
from baselines.report.index import main, write_report
from baselines.report.metrics import (
    RunCounts,
    constant_series,
    evaluation_metrics,
    first_and_last,
    headline_metrics,
    metric_series,
    run_counts,
)
from baselines.report.rewards import EpisodeRewards, episode_rewards
from baselines.report.transcripts import episode_html
from baselines.run_directory import EPISODES_DIR, METRICS_FILE

__all__ = [
    "EPISODES_DIR",
    "METRICS_FILE",
    "EpisodeRewards",
    "RunCounts",
    "Series",
    "constant_series",
    "episode_html",
    "episode_rewards",
    "evaluation_metrics",
    "first_and_last",
    "headline_metrics",
    "load_metrics",
    "main",
    "metric_series",
    "run_counts",
    "write_report",
]
