r"""The sandbox as an HTTP service that speaks SandboxFusion's API.

verl, MARTI, tinker-cookbook and the ``sandbox-fusion`` client send code to a
SandboxFusion server; pointing them at this service instead runs that code in
:class:`~llm_envs.sandbox.Sandbox` workers (a fork of a warm worker per run,
no container start). Start it with::

    python -m llm_envs.sandbox.service --port 8080 --workers 2

Routes (request and response shapes as SandboxFusion's, ``docs/sandbox_service.md``):

* ``POST /run_code``: run a Python script (``code``, ``stdin``, ``files``,
  ``run_timeout``) and answer ``status``, ``message`` and ``run_result``
  (``status``, ``execution_time``, ``return_code``, ``stdout``, ``stderr``).
  The script runs as ``__main__`` with its stdin, its files in its working
  directory, and its exit status as ``return_code``, as ``python main.py``
  would run it (:func:`script_program`). Any other language gets
  SandboxFusion's error shape (``status: "SandboxError"``) saying so.
* ``POST /submit``: a completion for a problem of HumanEval, MBPP (sanitized)
  or CoopHumanEval; the verdict is :func:`~llm_envs.sandbox.run_tests`'s on
  that problem (:func:`submission_program`): ``accepted`` when every test
  passed, one entry of ``tests`` per test.
* ``POST /get_prompts``, ``POST /get_prompt_by_id``, ``POST /list_ids``,
  ``GET /list_datasets``, ``GET /v1/ping``: the problems served, and liveness.

Each process holds one pool; ``--workers N`` runs N processes on one port
(uvicorn's workers share the listening socket), each pinned to its own share
of the CPUs.

Its modules: :mod:`~.app` (the routes), :mod:`~.shapes` (settings, requests,
answers), :mod:`~.scripts` (``/run_code``), :mod:`~.submissions`
(``/submit``), :mod:`~.fair` (turns between clients, bounds),
:mod:`~.server` (serving it: a thread, or processes sharing a port; the
command). This package is the only part of ``llm_envs`` that imports fastapi
and uvicorn, and nothing else of the library imports it. It never executes a
request's code itself: every program goes to the pool, and verdicts come from
its reports.
"""

from __future__ import annotations

from llm_envs.sandbox.service.app import create_app
from llm_envs.sandbox.service.scripts import (
    ScriptJob,
    ScriptResult,
    ScriptRunner,
    script_program,
    script_result,
)
from llm_envs.sandbox.service.server import PROG, main, running_service
from llm_envs.sandbox.service.shapes import ServiceSettings
from llm_envs.sandbox.service.submissions import DATASETS, submission_program

__all__ = [
    "DATASETS",
    "PROG",
    "ScriptJob",
    "ScriptResult",
    "ScriptRunner",
    "ServiceSettings",
    "create_app",
    "main",
    "running_service",
    "script_program",
    "script_result",
    "submission_program",
]
