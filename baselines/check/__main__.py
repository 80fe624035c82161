"""``python -m baselines.check NAME`` (``llm-envs check NAME``): the pre-flight check of a family.

Prints one line per check (PASS, FAIL or SKIP, and the number), writes the
page and its numbers to ``output_dir/NAME/`` (``NAME-TASK`` for a task other
than ``default``), and exits with status 0 when no
check failed, 1 when one did (so it can gate a CI job), 2 for a bad setting
(an unknown family, a bad flag, a setting the family refuses).
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["main"]

PROG = "python -m baselines.check"


def main(argv: list[str] | None = None, *, prog: str = PROG) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    ``prog`` is the name that ``--help`` and error messages show (``llm-envs check``).
    """
    from baselines.check.config import parse_check_args
    from baselines.check.page import write_page
    from baselines.check.run import load_model, run_checks
    from baselines.training.run import setup_errors_exit

    config = parse_check_args(argv, prog=prog)
    with setup_errors_exit(prog):
        model = load_model(config.model) if config.model is not None else None  # before any play
        report = run_checks(config, model=model)
    # One folder per family and task: checks of two tasks of one family do not overwrite each other.
    task = "" if config.task == "default" else f"-{config.task}"
    folder = Path(config.output_dir) / f"{report.family}{task}"
    with setup_errors_exit(prog):
        page = write_page(report, folder)
    for result in report.results:
        print(result.line(), flush=True)
    failed = len(report.failed)
    verdict = f"{failed} check{'s' * (failed != 1)} failed" if failed else "every check passed"
    print(f"{report.family}: {verdict} in {report.seconds:.0f} s; page: {page}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
