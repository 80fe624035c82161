"""``python -m baselines.report RUN_DIR``: write a run's report."""

from baselines.report.index import main

main()
