"""One sandbox worker interpreter, seen from the caller's process: starting it, and its frames.

The pool (:mod:`llm_envs.sandbox.pool`) keeps one :class:`WorkerProcess` per
slot. Each starts ``python -P -s -S`` with a scrubbed environment and the
worker's bootstrap, and exchanges frames with it: a 4-byte big-endian length,
then the payload (requests marshalled by the trusted caller; replies JSON, so
nothing a worker wrote is ever unmarshalled here).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llm_envs.sandbox import _cgroups

__all__ = ["BOOTSTRAP", "WORKER_ENVIRONMENT", "WorkerProcess", "try_control_groups"]

# The whole environment of a worker and of every run: nothing of the caller's
# (tokens, credentials, proxies) reaches untrusted code. A fixed hash seed makes
# runs reproducible (set iteration order), whichever worker they land on.
WORKER_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
}

# Loads the worker without executing llm_envs/__init__ (which imports the
# environments and their dependencies): stub package modules point the import
# system at the source folders.
_STUBS = """\
import json, sys, types
root = sys.argv[1]
for name in ("llm_envs", "llm_envs.sandbox"):
    package = types.ModuleType(name)
    package.__path__ = [root + "/" + name.replace(".", "/")]
    sys.modules[name] = package
"""
BOOTSTRAP = _STUBS + "from llm_envs.sandbox._worker import main\nmain(sys.argv[2])\n"
# Runs _cgroups.trial on a probe's groups (see try_control_groups), loaded as BOOTSTRAP is.
_TRIAL = _STUBS + "from llm_envs.sandbox._cgroups import trial\ntrial(json.loads(sys.argv[2]))\n"
_TRIAL_TIMEOUT = 30.0


def try_control_groups(support: _cgroups.Support) -> str:
    """Whether a worker could use groups here: "" if so, else why not.

    A probe's groups are created, used by a child process exactly as a worker and
    its spawner use theirs (:func:`._cgroups.trial`), and removed. A machine that
    lists the controllers but refuses a group, a limit or a move (a limit on the
    number of groups, a read-only mount, v2's rules on who may move a process)
    then runs without, and says why, instead of failing its workers.
    """
    try:
        probe = _cgroups.create_groups(support, _cgroups.group_name("probe"), cpus=None)
    except OSError as error:
        return f"creating a control group failed: {error}"
    try:
        root = str(Path(__file__).resolve().parents[2])
        tried = subprocess.run(
            [sys.executable, "-P", "-s", "-S", "-c", _TRIAL, root, json.dumps(probe.as_config())],
            capture_output=True,
            env=WORKER_ENVIRONMENT,
            cwd="/",
            timeout=_TRIAL_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"trying a control group failed: {error}"
    finally:
        _cgroups.remove_groups(probe)
    if tried.returncode != 0:
        lines = tried.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"using a control group failed: {lines[-1] if lines else tried.returncode}"
    return ""


class WorkerProcess:
    """One worker interpreter, the pipes to it, and its control groups.

    Args:
        config: the pool's settings, with this worker's ``index``.
        support: where control groups go (version 0: none).

    Raises:
        OSError: the worker's control groups could not be created.
    """

    def __init__(self, config: dict[str, Any], support: _cgroups.Support) -> None:
        self.scratch = tempfile.mkdtemp(prefix="llm-envs-sandbox-")
        config = {**config, "scratch": self.scratch, "cgroups": None}
        self.groups: _cgroups.GroupSpec | None = None
        if support.version:
            allowed = sorted(os.sched_getaffinity(0))
            cpus = [allowed[int(config["index"]) % len(allowed)]] if config["pin"] else None
            name = _cgroups.group_name(os.path.basename(self.scratch))
            try:
                self.groups = _cgroups.create_groups(support, name, cpus=cpus)
            except OSError:
                shutil.rmtree(self.scratch, ignore_errors=True)
                raise
            config["cgroups"] = self.groups.as_config()
        root = str(Path(__file__).resolve().parents[2])
        flags = ["-P", "-s"] if config["site_packages"] else ["-P", "-s", "-S"]
        try:
            self.process = subprocess.Popen(
                [sys.executable, *flags, "-c", BOOTSTRAP, root, json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=WORKER_ENVIRONMENT,
                cwd="/",
                start_new_session=True,
            )
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            if self.groups is not None:
                _cgroups.remove_groups(self.groups)
            raise
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin_fd = self.process.stdin.fileno()
        self.stdout_fd = self.process.stdout.fileno()
        self.buffer = bytearray()
        self.hello: dict[str, Any] | None = None

    def send(self, payload: bytes) -> None:
        view = memoryview(payload)
        while view:
            view = view[os.write(self.stdin_fd, view) :]

    def read_message(self) -> dict[str, Any] | None:
        """Read what is available; the next complete message, or None if incomplete.

        Raises:
            EOFError: the worker closed its end (it died).
        """
        chunk = os.read(self.stdout_fd, 1 << 20)
        if not chunk:
            raise EOFError
        self.buffer += chunk
        return self._pop_message()

    def read_messages(self) -> list[dict[str, Any]]:
        """Read what is available; every complete message in it (EOFError if the worker died)."""
        messages = []
        message = self.read_message()
        while message is not None:
            messages.append(message)
            message = self._pop_message()
        return messages

    def _pop_message(self) -> dict[str, Any] | None:
        if len(self.buffer) < 4:
            return None
        size = struct.unpack(">I", self.buffer[:4])[0]
        if len(self.buffer) < 4 + size:
            return None
        payload = bytes(self.buffer[4 : 4 + size])
        del self.buffer[: 4 + size]
        message: dict[str, Any] = json.loads(payload)
        return message

    def wait_message(self, deadline: float) -> dict[str, Any]:
        """Block until a message arrives (EOFError if the worker dies, TimeoutError at deadline)."""
        message = self._pop_message()
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdout_fd, selectors.EVENT_READ)
            while message is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                if selector.select(remaining):
                    message = self.read_message()
        return message

    def exit_description(self) -> str:
        code = self.process.poll()
        if code is None:
            return "is unresponsive"
        if code < 0:
            return f"was killed by signal {-code}"
        return f"exited with code {code}"

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, 9)
        self.process.wait()
        self._close_pipes()
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.groups is not None:
            # (Without a PID namespace, what a run started may outlive a killed
            # worker: its groups still hold it, and removing them kills it.)
            _cgroups.remove_groups(self.groups)
            self.groups = None

    def shut_down(self, wait: float) -> None:
        """Close the request pipe (the worker exits after its current run), then kill."""
        with contextlib.suppress(OSError):
            os.close(self.stdin_fd)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(wait)
        self.kill()

    def _close_pipes(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
