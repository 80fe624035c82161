"""``python -m llm_envs.serve``: serve llm-envs episodes over HTTP and WebSocket.

::

    python -m llm_envs.serve --env debate --task arithmetic --port 8000 --records runs/serve

``--env``, ``--env-kwargs``, ``--task`` and ``--task-kwargs`` are the defaults
of what a request leaves out; a request may name any registered env. The
default env's family is built before the server listens, so bad settings fail
here (exit status 2) with the family's message. ``docs/serve.md`` describes
the protocol.

Beyond loopback (``--host 0.0.0.0``) the server needs a token, ``--token`` or
the ``LLM_ENVS_SERVE_TOKEN`` environment variable (which ``ps`` does not
show), and every client must send it; without one it refuses to start.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from llm_envs.command_line import CommandParser

__all__ = ["build_parser", "main"]


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text!r}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"needs a JSON object like '{{\"num_agents\": 3}}', got {text!r}"
        )
    return value


def _positive(text: str) -> float:
    """Seconds: a finite number above 0."""
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from exc
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _whole(text: str, low: int = 1, high: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from exc
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"from {low} to {high}"
        raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
    return value


def _port(text: str) -> int:
    return _whole(text, 0, 65535)


_LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def build_parser(prog: str) -> CommandParser:
    """The command line's flags, with the project's one error style (:class:`CommandParser`)."""
    parser = CommandParser(
        prog=prog,
        description="Serve llm-envs episodes over HTTP and WebSocket, one client per seat, and "
        "single seats (reference players in the others) to OpenEnv clients under /openenv.",
    )
    parser.add_argument("--env", help="the default env (a registered family, e.g. debate)")
    parser.add_argument("--env-kwargs", type=_json_object, default={}, help="its arguments, JSON")
    parser.add_argument("--task", help="its task (default: the family's first)")
    parser.add_argument("--task-kwargs", type=_json_object, default={}, help="the task's settings")
    parser.add_argument("--seed", type=int, default=0, help="the families' seed: which problems")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=_port, default=8000, help="the port (0: any free one)")
    parser.add_argument("--records", help="directory of episodes.jsonl (default: memory only)")
    parser.add_argument(
        "--max-records-bytes",
        type=_whole,
        default=4 << 30,
        help="size of episodes.jsonl past which new episodes get 503, so that a full disk loses "
        "no record (default 4294967296: 4 GiB)",
    )
    parser.add_argument(
        "--seat-timeout",
        type=_positive,
        default=300.0,
        help="seconds a seat has to act; then the server plays '' for it (default 300)",
    )
    parser.add_argument(
        "--max-episodes", type=_whole, default=1024, help="multi-seat episodes at once"
    )
    parser.add_argument("--max-sessions", type=_whole, default=64, help="OpenEnv sessions at once")
    parser.add_argument(
        "--workers", type=_whole, help="threads running env steps (default: Python's)"
    )
    parser.add_argument(
        "--token",
        help="the secret every request must carry (Authorization: Bearer); required beyond "
        "loopback (default: the LLM_ENVS_SERVE_TOKEN environment variable)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=_whole,
        default=1 << 20,
        help="the largest request body and WebSocket message taken (default 1048576: 1 MiB)",
    )
    parser.add_argument(
        "--max-connections",
        type=_whole,
        help="open connections (HTTP and WebSocket) past which a new one gets 503 (default: the "
        "open-file limit, raised to its hard limit at start, less 128 kept for records)",
    )
    parser.add_argument(
        "--max-connections-per-address",
        type=_whole,
        help="open connections of one client (an address; an IPv6 /48) past which its new one "
        "gets 503, leaving room for the others (default: a quarter of --max-connections)",
    )
    parser.add_argument(
        "--max-held-chars",
        type=_whole,
        default=1 << 30,
        help="characters of actions the running episodes may hold together; an action past it "
        "gets 503 until episodes end (default 1073741824: about 2.5 GiB of memory)",
    )
    parser.add_argument(
        "--max-episodes-per-client",
        type=_whole,
        help="episodes one client (an address; an IPv6 /48) runs at once, leaving room for the "
        "others (default: a quarter of --max-episodes)",
    )
    parser.add_argument(
        "--max-sessions-per-client",
        type=_whole,
        help="OpenEnv sessions one client holds at once (default: a quarter of --max-sessions)",
    )
    parser.add_argument(
        "--max-held-chars-per-client",
        type=_whole,
        help="characters of actions one client's episodes and OpenEnv sessions may hold "
        "(default: a quarter of --max-held-chars)",
    )
    parser.add_argument(
        "--step-deadline",
        type=_positive,
        default=60.0,
        help="seconds one environment step may run; then the episode ends for the seat as a "
        "timeout (default 60)",
    )
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=_LOG_LEVELS,
        default="info",
        help="uvicorn's log level",
    )
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m llm_envs.serve") -> int:
    """Run the server until interrupted; return the exit status (2 for bad flags or settings)."""
    parser = build_parser(prog)
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        import uvicorn

        from llm_envs.serve.app import ServeSettings, build_app
    except ModuleNotFoundError as exc:
        print(
            f"{prog}: needs the {exc.name} package, which is not installed: "
            'pip install "llm-envs[serve]" && pip install --no-deps openenv-core==0.3.0',
            file=sys.stderr,
        )
        return 2
    from llm_envs.serve.errors import ServeError
    from llm_envs.serve.families import Defaults
    from llm_envs.serve.guard import check_exposure, token_from_environment, uvicorn_limits

    token = token_from_environment(args.token)
    try:
        check_exposure(args.host, token)
    except ValueError as exc:
        parser.error(str(exc))
    # Every setting but the defaults is the flag of its name.
    flags = {f.name: getattr(args, f.name) for f in fields(ServeSettings) if f.name != "defaults"}
    defaults = Defaults(args.env, args.env_kwargs, args.task, args.task_kwargs)
    settings = ServeSettings(defaults=defaults, **{**flags, "token": token})
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s: %(name)s: %(message)s")
    try:
        app = build_app(settings)
    except (ServeError, ValueError) as exc:  # a bad per-client share is a ValueError
        parser.error(str(exc))
    _most_descriptors()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        **uvicorn_limits(
            settings.max_body_bytes,
            settings.max_connections,
            settings.max_connections_per_address,
        ),
    )
    return 0


def _most_descriptors() -> None:
    """Raise the soft limit of open files to the hard one: every connection holds one.

    A common soft limit is 1,024: that many idle connections left the server
    unable to answer anyone or to open its records file.
    """
    try:
        import resource
    except ImportError:  # not on this platform
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


if __name__ == "__main__":
    sys.exit(main())
