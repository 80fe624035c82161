"""``llm-envs check NAME``: before any GPU is spent, can training on this family work at all?

On CPU, with the family's own scripted players (and optionally a small model),
it checks the family's environments conform to PettingZoo's API and ours; the
reference player scores and an empty or random answer does not; training
groups' rewards vary; returns stay in the declared range; a seeded episode
replays identically; a judged family's judges agree with the reference and
favour no seat; verdicts hold when the machine is loaded; and how long a step
takes. It asks the family only through the registry, so a family installed
from another package is checked the same way; a capability the family lacks
is a SKIP that names it.

Modules: :mod:`.config` (the flags), :mod:`.players` (who plays),
:mod:`.play` (playing plans), :mod:`.checks` (each check's formula and
threshold), :mod:`.run` (the order of play), :mod:`.page` (``index.html`` and
``check.json``). Importing this does not import torch.
"""

from baselines.check.checks import CheckResult, Status
from baselines.check.config import CheckConfig, parse_check_args
from baselines.check.run import CheckReport, run_checks

__all__ = ["CheckConfig", "CheckReport", "CheckResult", "Status", "parse_check_args", "run_checks"]
