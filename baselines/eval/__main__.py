"""``python -m baselines.eval``: evaluate models in an environment, print the tables.

Exit status: 0 when every planned episode was played and summarized; 2 for a
bad setting (a bad flag, a missing model folder, an unknown environment
argument), reported before any model is loaded; 1 when a server failed after
its retries (the episodes finished so far are kept: run the same command again
to resume).
"""

from __future__ import annotations

import sys

from baselines.eval.config import parse_eval_args
from baselines.samplers.openai_policy import ServerError

__all__ = ["main"]

PROG = "python -m baselines.eval"


def main(argv: list[str] | None = None, *, prog: str = PROG) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    ``prog`` is the name that ``--help`` and error messages show (``llm-envs eval``).
    """
    from baselines.eval.run import Evaluation
    from baselines.progress import heartbeat
    from baselines.training.run import setup_errors_exit

    config = parse_eval_args(argv, prog=prog)
    with heartbeat(enabled=config.progress):
        with setup_errors_exit(prog):
            evaluation = Evaluation(config)
        planned = len(evaluation.plan)
        print(
            f"{config.env}: {len(evaluation.names)} models, {config.problems} problems x "
            f"{len(evaluation.schedule)} seatings ({evaluation.seating_mode}) = {planned} episodes "
            f"-> {evaluation.run_dir.path}",
            file=sys.stderr,
            flush=True,
        )
        try:
            summary = evaluation.run()
        except ServerError as exc:
            print(
                f"{prog}: error: {exc}\nThe episodes finished so far are in {evaluation.log.path}; "
                "run the same command again to play the rest.",
                file=sys.stderr,
                flush=True,
            )
            return 1
    print(summary.to_text())
    print(f"\nresults: {evaluation.log.path}\nsummary: {evaluation.summary_path}")
    if config.report:
        print(f"report: {evaluation.run_dir.path / 'report' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
