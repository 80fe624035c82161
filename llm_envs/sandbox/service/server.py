"""How the sandbox service is served: in a thread, or as processes sharing one port.

``python -m llm_envs.sandbox.service`` (or ``llm-envs sandbox-serve``) runs
:func:`main`: one uvicorn process, or ``--workers N`` processes that share the
listening socket (uvicorn's workers). Each process builds its own app, and so
its own pool, with :func:`app_from_environment`, which first takes a share of
the CPUs that no other process of the service holds: each pool pins its
workers to CPUs of its share, so two pools never pin to the same CPU.
:func:`running_service` serves in a thread of the caller's process (tests,
notebooks, a training script on one machine).

What the service answers is :mod:`llm_envs.sandbox.service.app`; this module only
starts and stops it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, fields, replace
from typing import IO, Any

import uvicorn
from fastapi import FastAPI

from llm_envs.command_line import CommandParser
from llm_envs.sandbox.pool import SandboxError
from llm_envs.sandbox.service.app import create_app
from llm_envs.sandbox.service.scripts import ScriptRunner
from llm_envs.sandbox.service.shapes import ServiceSettings
from llm_envs.serve.guard import uvicorn_limits

__all__ = ["ENVIRONMENT_VARIABLE", "PROG", "app_from_environment", "main", "running_service"]

PROG = "python -m llm_envs.sandbox.service"

ENVIRONMENT_VARIABLE = "LLM_ENVS_SANDBOX_SERVICE"
"""Carries the settings (JSON) from :func:`main` to the processes uvicorn starts."""


# --- several processes on one port ---------------------------------------------------------

_claimed: list[IO[bytes]] = []  # this process's CPU-share lock, held while it lives


def _cpu_shares(processes: int) -> list[list[int]] | None:
    """The CPUs of each process (contiguous, as even as can be), or None when too few."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < processes or processes < 2:
        return None
    bounds = [round(i * len(cpus) / processes) for i in range(processes + 1)]
    return [cpus[bounds[i] : bounds[i + 1]] for i in range(processes)]


def _claim_share(folder: str, shares: list[list[int]]) -> list[int] | None:
    """Take the first CPU share no live process holds (a lock file per share)."""
    for index, share in enumerate(shares):
        lock = open(os.path.join(folder, f"share-{index}.lock"), "wb")  # noqa: SIM115 (held)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        _claimed.append(lock)  # released by the kernel when this process ends
        return share
    return None


def app_from_environment() -> FastAPI:
    """The app for one of ``main``'s processes, from :data:`ENVIRONMENT_VARIABLE`.

    uvicorn calls it in each worker process (``--factory``). The process first
    takes a CPU share no other process of the service holds and keeps to it, so
    that the pools' pinned workers of two processes never share a CPU.
    """
    raw = os.environ.get(ENVIRONMENT_VARIABLE)
    if raw is None:
        raise RuntimeError(
            f"{ENVIRONMENT_VARIABLE} is not set: start the service with `{PROG}`, or build the "
            "app with create_app(settings)"
        )
    spec = json.loads(raw)
    settings = ServiceSettings(**spec["settings"])
    shares, folder = spec.get("cpu_shares"), spec.get("share_folder")
    if shares and folder and not _claimed:
        share = _claim_share(folder, shares)
        if share is not None:
            os.sched_setaffinity(0, share)
    elif not shares:
        # More processes than CPUs: no shares, pools that together fill the CPUs, and
        # no pinning (every pool would pin its first worker to the same CPU).
        cpus = len(os.sched_getaffinity(0))
        workers = settings.pool_workers or max(1, cpus // spec.get("processes", 1))
        settings = replace(settings, pool_workers=workers, pin_cpus=False)
    return create_app(settings)


def _uvicorn_settings(settings: ServiceSettings) -> dict[str, Any]:
    """The bounds on a request's head, and no proxy headers (:func:`uvicorn_limits`)."""
    return uvicorn_limits(settings.max_body_bytes)


@contextlib.contextmanager
def running_service(
    settings: ServiceSettings | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    script_runner: ScriptRunner | None = None,
    start_timeout: float = 120.0,
) -> Iterator[str]:
    r"""Serve in a thread of this process while the ``with`` block runs; yields the base URL.

    Args:
        settings: the service's settings.
        host: the address to listen on (loopback by default).
        port: the port (0: a free one).
        script_runner: see :func:`create_app`.
        start_timeout: seconds to wait for the pool and the socket.

    Raises:
        SandboxError: the service did not start (the pool failed, the port is taken).

    Example:
        >>> import json, urllib.request
        >>> body = json.dumps({"code": "print(6 * 7)", "language": "python"}).encode()
        >>> with running_service(ServiceSettings(pool_workers=1)) as url:
        ...     request = urllib.request.Request(
        ...         f"{url}/run_code", body, {"Content-Type": "application/json"}
        ...     )
        ...     with urllib.request.urlopen(request) as reply:
        ...         answer = json.load(reply)
        >>> answer["status"], answer["run_result"]["stdout"]
        ('Success', '42\n')
    """
    app = create_app(settings, script_runner=script_runner)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False,
        **_uvicorn_settings(settings or ServiceSettings()),
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="llm_envs.sandbox.service", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        server.should_exit = True
        thread.join()
        raise SandboxError(f"the sandbox service did not start on {host}:{port} (see the log)")
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join()


# --- the command ---------------------------------------------------------------------------


def _parser(prog: str) -> CommandParser:
    parser = CommandParser(
        prog=prog,
        description="Serve llm_envs.sandbox over HTTP with SandboxFusion's API (/run_code, "
        "/submit). Python only.",
    )
    default = ServiceSettings()
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    add("--port", type=int, default=8080, help="port (SandboxFusion's 8080 by default)")
    add("--workers", type=int, default=1, help="processes sharing the port, one pool each")
    add("--pool-workers", type=int, default=None,
        help="sandbox workers per process (default: one per CPU of its share)")  # fmt: skip
    add("--timeout", type=float, default=default.timeout,
        help="seconds a /submit run may take when config.run_timeout is null")  # fmt: skip
    add("--max-timeout", type=float, default=default.max_timeout,
        help="the longest run_timeout a request may ask for")  # fmt: skip
    add("--memory-mb", type=int, default=default.memory_mb, help="address space of a run, MiB")
    add("--output-limit", type=int, default=default.output_limit,
        help="bytes of stdout and of stderr kept per run")  # fmt: skip
    add("--max-program-chars", type=int, default=default.max_program_chars,
        help="the most characters of a request's program: /run_code's code, stdin and files "
        "(paths and base64), /submit's completion (422 past it)")  # fmt: skip
    add("--max-body-bytes", type=int, default=default.max_body_bytes,
        help="the largest request body read (413 past it)")  # fmt: skip
    add("--max-queued", type=int, default=default.max_queued,
        help="requests queued or running at once per process (503 past it)")  # fmt: skip
    add("--max-queued-per-client", type=int, default=default.max_queued_per_client,
        help="requests of one client address queued or running (429 past it)")  # fmt: skip
    add("--max-queued-bytes", type=int, default=default.max_queued_bytes,
        help="bytes of the bodies of requests queued or running (503 past it)")  # fmt: skip
    add("--max-queued-bytes-per-client", type=int, default=default.max_queued_bytes_per_client,
        help="bytes of one client's request bodies queued or running (429 past it)")  # fmt: skip
    add("--site-packages", action="store_true",
        help="let scripts import installed third-party packages")  # fmt: skip
    add("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    add("--access-log", action="store_true", help="log every request")
    return parser


_FLAG_SETTINGS = [f for f in fields(ServiceSettings) if f.name != "pin_cpus"]


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Run the service until interrupted (SIGINT, SIGTERM); return the exit status.

    ``prog`` is the name ``--help`` and errors show (``llm-envs sandbox-serve``).
    """
    parser = _parser(prog)
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in [0, 65535], got {args.port}")
    try:
        # Every setting but pin_cpus is a flag of the same name.
        settings = ServiceSettings(**{f.name: getattr(args, f.name) for f in _FLAG_SETTINGS})
    except (TypeError, ValueError) as error:
        flag = str(error).split(" ", 1)[0].replace("_", "-")
        parser.error(f"--{flag}: {error}")
    common = {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        "access_log": args.access_log,
        "timeout_graceful_shutdown": int(settings.max_timeout) + 10,
        **_uvicorn_settings(settings),
    }
    if args.workers == 1:
        uvicorn.run(create_app(settings), **common)
        return 0
    folder = tempfile.mkdtemp(prefix="llm-envs-sandbox-service-")
    spec = {
        "settings": asdict(settings),
        "processes": args.workers,
        "cpu_shares": _cpu_shares(args.workers),
        "share_folder": folder,
    }
    previous = os.environ.get(ENVIRONMENT_VARIABLE)
    os.environ[ENVIRONMENT_VARIABLE] = json.dumps(spec)
    try:
        uvicorn.run(
            "llm_envs.sandbox.service.server:app_from_environment",
            factory=True,
            workers=args.workers,
            **common,
        )
    finally:
        if previous is None:
            os.environ.pop(ENVIRONMENT_VARIABLE, None)
        else:
            os.environ[ENVIRONMENT_VARIABLE] = previous
        shutil.rmtree(folder, ignore_errors=True)
    return 0
