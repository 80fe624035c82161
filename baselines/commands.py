"""The ``llm-envs`` command: one entry point for the trainers, the report and evaluation.

::

    llm-envs train --env debate          # importance sampling (python -m baselines.is_trainer)
    llm-envs grpo --env debate           # TRL's GRPOTrainer (python -m baselines.grpo)
    llm-envs magrpo                      # MAGRPO (python -m baselines.magrpo)
    llm-envs report runs/is_trainer      # a run's report (python -m baselines.report)
    llm-envs eval ...                    # evaluation (python -m baselines.eval)
    llm-envs check debate                # the pre-flight check (python -m baselines.check)
    llm-envs best-response CHECKPOINT    # how beatable a checkpoint is, at least
    llm-envs serve --env debate          # episodes over the network (python -m llm_envs.serve)
    llm-envs sandbox-serve --port 8080   # SandboxFusion's API (python -m llm_envs.sandbox.service)
    llm-envs new-env my_game             # your environment's package (python -m llm_envs.scaffold)

``llm-envs-train``, ``llm-envs-report`` and ``llm-envs-eval`` are the same
subcommands as commands of their own (``pyproject.toml``'s
``[project.scripts]``). Everything after the subcommand goes to it unchanged,
so ``llm-envs train --help`` lists the trainer's flags, and ``accelerate
launch`` runs the module form (``-m baselines.is_trainer``) as before.

A subcommand's module is imported only when it runs: ``llm-envs report``
never imports torch.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["COMMANDS", "eval_main", "main", "report_main", "train_main"]


@dataclass(frozen=True)
class Command:
    """A subcommand: the module whose ``main(argv)`` runs it, and what it does."""

    module: str
    summary: str
    takes_prog: bool = True
    """Whether its ``main`` takes ``prog=`` (the name its ``--help`` and errors show)."""
    extra: str = "train"
    """The ``llm-envs[...]`` extra that installs what it needs."""


COMMANDS: dict[str, Command] = {
    "train": Command("baselines.is_trainer.trainer", "train with the importance-sampling trainer"),
    "grpo": Command("baselines.grpo.run", "train with TRL's GRPOTrainer"),
    "magrpo": Command("baselines.magrpo.trainer", "train helper and main agents with MAGRPO"),
    "report": Command(
        "baselines.report.index", "write a run's report (curves, transcripts)", takes_prog=False
    ),
    "eval": Command(
        "baselines.eval.__main__", "evaluate models in an environment; rank them by debate"
    ),
    "check": Command(
        "baselines.check.__main__", "check on CPU that training on an environment can work"
    ),
    "best-response": Command(
        "baselines.is_trainer.best_response",
        "train a best responder against a checkpoint: a lower bound on its exploitability",
    ),
    "serve": Command(
        "llm_envs.serve.__main__",
        "serve environments over HTTP and WebSocket, one client per seat",
        extra="serve",
    ),
    "sandbox-serve": Command(
        "llm_envs.sandbox.service.server",
        "serve the sandbox over HTTP with SandboxFusion's API (/run_code, /submit)",
        extra="sandbox-service",
    ),
    "new-env": Command(
        "llm_envs.scaffold.new_env", "write the package of a new environment family, ready to train"
    ),
}


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [
        "usage: llm-envs COMMAND [ARGS...]",
        "",
        "Train, evaluate and report on language models in llm-envs environments.",
        "",
        "commands:",
        *(f"  {name:<{width}}  {c.summary}" for name, c in COMMANDS.items()),
        "",
        "`llm-envs COMMAND --help` lists a command's flags.",
    ]
    return "\n".join(lines)


def run(name: str, argv: Sequence[str]) -> int:
    """Run the subcommand ``name`` with ``argv``; return the exit status.

    Raises:
        SystemExit: status 2 with a message when the subcommand's module is not
            installed (or not written yet), as for a bad flag.
    """
    command = COMMANDS[name]
    try:
        module = importlib.import_module(command.module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and command.module.startswith(exc.name):
            print(
                f"llm-envs {name}: this installation has no {command.module} "
                f"(`{name}` is not available in llm-envs {_version()})",
                file=sys.stderr,
            )
            raise SystemExit(2) from None
        print(
            f"llm-envs {name}: needs the {exc.name} package, which is not installed: "
            f'pip install "llm-envs[{command.extra}]"',
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    entry: Callable[..., object] = module.main
    kwargs = {"prog": f"llm-envs {name}"} if command.takes_prog else {}
    status = entry(list(argv), **kwargs)
    # The trainers return paths or metrics; only an int is an exit status.
    return status if isinstance(status, int) and not isinstance(status, bool) else 0


def _version() -> str:
    from llm_envs import __version__

    return str(__version__)


def main(argv: Sequence[str] | None = None) -> int:
    """``llm-envs COMMAND [ARGS...]``; return the exit status.

    Example:
        >>> main(["--version"])  # doctest: +ELLIPSIS
        llm-envs ...
        0
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(f"llm-envs {_version()}")
        return 0
    if args[0] not in COMMANDS:
        print(
            f"llm-envs: unknown command {args[0]!r}; choose one of {sorted(COMMANDS)} "
            "(llm-envs --help)",
            file=sys.stderr,
        )
        return 2
    return run(args[0], args[1:])


def train_main(argv: Sequence[str] | None = None) -> int:
    """``llm-envs-train``: the same as ``llm-envs train``."""
    return run("train", sys.argv[1:] if argv is None else argv)


def report_main(argv: Sequence[str] | None = None) -> int:
    """``llm-envs-report``: the same as ``llm-envs report``."""
    return run("report", sys.argv[1:] if argv is None else argv)


def eval_main(argv: Sequence[str] | None = None) -> int:
    """``llm-envs-eval``: the same as ``llm-envs eval``."""
    return run("eval", sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":  # pragma: no cover - python -m baselines.commands
    raise SystemExit(main())
