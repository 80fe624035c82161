"""The sandbox service's routes: SandboxFusion's API over one process's pool.

:func:`create_app` builds the ASGI app; its pool starts and stops with the
app's lifespan. Every route that runs a program takes a turn of the fair
queue (:mod:`~llm_envs.sandbox.service.fair`); the server's guard
(:class:`~llm_envs.serve.guard.Guard`) caps each body before a route reads it.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from llm_envs.sandbox.pool import SandboxError
from llm_envs.sandbox.service.fair import FairQueue, client_key
from llm_envs.sandbox.service.scripts import (
    ScriptJob,
    ScriptResult,
    ScriptRunner,
    check_files,
    program_chars,
    run_result,
    script_program,
    script_result,
)
from llm_envs.sandbox.service.shapes import (
    PromptByIdRequest,
    PromptsRequest,
    RunCodeRequest,
    RunStatus,
    ServiceSettings,
    SubmitRequest,
    response,
)
from llm_envs.sandbox.service.submissions import (
    DATASETS,
    Problems,
    submission_program,
    test_cases,
)
from llm_envs.serve.guard import Guard
from llm_envs.tasks import CodeProblem

__all__ = ["POOL_ROUTES", "create_app"]

POOL_ROUTES = frozenset({"/run_code", "/submit"})
"""The routes that run a program in the pool: queued fairly, per client (:class:`FairQueue`)."""


# --- the service -------------------------------------------------------------------------------


def _pod_name() -> str:
    """The answers' ``executor_pod_name``: SandboxFusion's ``MY_POD_NAME``, or this process."""
    return os.environ.get("MY_POD_NAME") or f"{platform.node()}:{os.getpid()}"


class _Service:
    """One process's pool, problems and settings; the routes' logic, free of HTTP."""

    def __init__(self, settings: ServiceSettings, script_runner: ScriptRunner | None) -> None:
        self.settings = settings
        self.pool = settings.sandbox()
        self.run_script = script_runner or self._run_in_pool
        self.problems = Problems()
        self.pod = _pod_name()

    def close(self) -> None:
        self.pool.close()

    def _run_in_pool(self, job: ScriptJob) -> ScriptResult:
        return script_result(self.pool.run_tests(script_program(job), [], timeout=job.timeout))

    def _timeout(self, value: float | None, name: str) -> float:
        if value is None:
            return self.settings.timeout
        if not (0 < value <= self.settings.max_timeout):
            raise HTTPException(
                422,
                f"{name} must be in (0, {self.settings.max_timeout:g}] seconds, got {value!r}; "
                "ask for less, or start the service with a larger --max-timeout",
            )
        return float(value)

    def _check_size(self, size: int, what: str) -> None:
        if size > self.settings.max_program_chars:
            raise HTTPException(
                422,
                f"{what} to {size:,} characters; this service takes at most "
                f"{self.settings.max_program_chars:,} (--max-program-chars): send less, or start "
                "the service with a larger --max-program-chars",
            )

    def run_code(self, request: RunCodeRequest) -> dict[str, Any]:
        if request.language != "python":
            return response(
                "SandboxError",
                f"language {request.language!r} is not served: this service (llm_envs.sandbox) "
                "runs Python only; send language 'python', or use a SandboxFusion server for "
                "other languages",
                None,
                self.pod,
            )
        job = ScriptJob(
            request.code,
            request.stdin,
            check_files(request.files),
            self._timeout(request.run_timeout, "run_timeout"),
        )
        self._check_size(program_chars(job), "code, stdin and files (paths and base64) come")
        try:
            result = self.run_script(job)
        except SandboxError as error:
            return response("SandboxError", f"the sandbox failed: {error}", None, self.pod)
        notes = [result.note] if result.note else []
        if request.fetch_files:
            notes.append(
                f"fetch_files is not supported (a run leaves no files behind): "
                f"{request.fetch_files!r} not fetched; print what you need instead"
            )
        message = "; ".join(notes)
        if result.status == "Error":
            return response("SandboxError", message, None, self.pod)
        status: RunStatus = (
            "Success" if result.status == "Finished" and result.return_code == 0 else "Failed"
        )
        return response(status, message, run_result(result), self.pod)

    def submit(self, request: SubmitRequest) -> dict[str, Any]:
        config = request.config
        if config.language not in (None, "python"):
            raise HTTPException(400, f"config.language {config.language!r}: only python is served")
        for name in ("custom_extract_logic", "provided_data"):
            if getattr(config, name) is not None:
                raise HTTPException(400, f"config.{name} is not supported; leave it unset (null)")
        self._check_size(len(request.completion), "the completion comes")
        problem = self.problems.get(request.dataset, request.id)
        timeout = self._timeout(config.run_timeout, "config.run_timeout")
        program, code, extracted = submission_program(problem, request.completion)
        try:
            report = self.pool.run_tests(
                program,
                problem.tests,
                setup=problem.test_setup,
                timeout=timeout,
                entry_point=problem.entry_point,
            )
        except SandboxError as error:
            raise HTTPException(503, f"the sandbox failed: {error}") from None
        return {
            "id": request.id,
            "accepted": report.all_passed,
            "extracted_code": code,
            "full_code": program,
            "test_code": problem.test_setup + "".join(f"\n{test}" for test in problem.tests),
            "tests": test_cases(problem, report, self.pod),
            "extracted_type": extracted,
            "extra": {
                "task_id": problem.task_id,
                "program_status": report.status.value,
                "error": report.error,
                "passed": report.passed,
                "total": report.total,
                "pass_rate": report.pass_rate,
            },
        }

    def prompt(self, problem: CodeProblem) -> dict[str, Any]:
        labels = {
            "task_id": problem.task_id,
            "entry_point": problem.entry_point,
            "tests": list(problem.tests),
            "test_setup": problem.test_setup,
        }
        return {"id": problem.task_id, "prompt": problem.prompt, "labels": labels}


class _Admission:
    """Counts requests into the fair queue before a byte of their bodies is read.

    ``/run_code`` and ``/submit`` count as requests and by their bodies'
    bytes; a request to any other path (``/list_ids``, a 404) by its body's
    bytes alone, and one without a body not at all: the guard inside reads
    every body whole, whatever the route. A refused request is answered here
    (429 or 503, ``Retry-After``), its body unread.
    """

    def __init__(self, app: ASGIApp, queue: FairQueue, max_body_bytes: int) -> None:
        self.app = app
        self.queue = queue
        self.max_body_bytes = max_body_bytes

    def _body_bytes(self, scope: Scope) -> int:
        """The bytes the guard may read: the declared length, else the cap when streamed."""
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"").strip()
        if declared.isdigit():
            return min(int(declared), self.max_body_bytes)
        # HTTP/1.1: a request that declares neither a length nor chunks has no body.
        return self.max_body_bytes if b"transfer-encoding" in headers else 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        runs = scope["path"] in POOL_ROUTES
        size = self._body_bytes(scope)
        if not runs and not size:
            await self.app(scope, receive, send)
            return
        client = client_key((scope.get("client") or ("", 0))[0])
        refusal = self.queue.admit(client, size, runs=runs)
        if refusal is not None:
            body = json.dumps({"detail": refusal.detail}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
                (b"retry-after", b"%d" % refusal.retry_after),
            ]
            start = {"type": "http.response.start", "status": refusal.status, "headers": headers}
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.queue.leave(client, size, runs=runs)


def create_app(
    settings: ServiceSettings | None = None, *, script_runner: ScriptRunner | None = None
) -> FastAPI:
    """The service as an ASGI app; its pool starts with the app (lifespan) and closes with it.

    Args:
        settings: the pool's and the routes' settings (default: :class:`ServiceSettings`).
        script_runner: runs ``/run_code``'s scripts instead of the pool (the
            subprocess baseline of ``bench/sandbox_service.py``); ``/submit``
            always uses the pool.
    """
    settings = settings or ServiceSettings()
    # One slot per pool worker (the pool's own count: one per CPU this process may use).
    slots = settings.pool_workers or len(os.sched_getaffinity(0))
    queue = FairQueue(
        slots,
        max_per_client=settings.max_queued_per_client,
        max_total=settings.max_queued,
        max_bytes=settings.max_queued_bytes,
        max_bytes_per_client=settings.max_queued_bytes_per_client,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = await anyio.to_thread.run_sync(_Service, settings, script_runner)
        app.state.service = service
        # The queue lets `slots` requests run at once: as many threads, no more.
        app.state.pool_threads = anyio.CapacityLimiter(slots)
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(service.close)

    app = FastAPI(
        title="llm_envs.sandbox.service",
        description="SandboxFusion's API, served by llm_envs.sandbox (Python only)",
        lifespan=lifespan,
    )

    def service() -> _Service:
        return app.state.service

    async def in_turn(request: Request, call: Callable[[Any], dict[str, Any]], body: Any) -> Any:
        async with queue.turn(client_key(request.client.host if request.client else None)):
            return await anyio.to_thread.run_sync(call, body, limiter=app.state.pool_threads)

    # The answers are plain JSON built by the service: sent as they are, unvalidated.
    @app.post("/run_code", tags=["sandbox"], response_class=JSONResponse)
    async def run_code(body: RunCodeRequest, request: Request) -> JSONResponse:
        if script_runner is not None:  # the bench's subprocess baseline: no pool, no turns
            return JSONResponse(await anyio.to_thread.run_sync(service().run_code, body))
        return JSONResponse(await in_turn(request, service().run_code, body))

    @app.post("/submit", tags=["datasets"], response_class=JSONResponse)
    async def submit(body: SubmitRequest, request: Request) -> JSONResponse:
        return JSONResponse(await in_turn(request, service().submit, body))

    @app.get("/list_datasets", tags=["datasets"])
    def list_datasets() -> list[str]:
        return sorted(DATASETS)

    @app.post("/list_ids", tags=["datasets"])
    def list_ids(request: PromptsRequest) -> list[str]:
        ids = list(service().problems.all(request.dataset))
        return ids[request.offset : request.offset + request.limit]

    @app.post("/get_prompts", tags=["datasets"])
    def get_prompts(request: PromptsRequest) -> list[dict[str, Any]]:
        problems = list(service().problems.all(request.dataset).values())
        page = problems[request.offset : request.offset + request.limit]
        return [service().prompt(problem) for problem in page]

    @app.post("/get_prompt_by_id", tags=["datasets"])
    def get_prompt_by_id(request: PromptByIdRequest) -> dict[str, Any]:
        return service().prompt(service().problems.get(request.dataset, request.id))

    @app.get("/v1/ping", tags=["sandbox"])
    def ping() -> str:
        return "pong"

    # The guard reads a body, up to its cap, before any route parses it; admission,
    # outside it, counts a request in before the guard reads a byte of its body.
    app.add_middleware(Guard, token=None, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(_Admission, queue=queue, max_body_bytes=settings.max_body_bytes)
    return app
