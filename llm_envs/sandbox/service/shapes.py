"""The service's shapes: its settings, SandboxFusion's requests and answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llm_envs.arguments import MAX_TIMEOUT, check_bool, check_int, check_number
from llm_envs.sandbox.pool import DEFAULT_TIMEOUT, Sandbox

__all__ = [
    "CommandRunStatus",
    "PromptByIdRequest",
    "PromptsRequest",
    "RunCodeRequest",
    "RunStatus",
    "ServiceSettings",
    "SubmitRequest",
    "TestConfig",
]

CommandRunStatus = Literal["Finished", "Error", "TimeLimitExceeded"]
RunStatus = Literal["Success", "Failed", "SandboxError"]


# --- settings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceSettings:
    """What one process of the service runs with.

    Attributes:
        pool_workers: sandbox workers of this process, i.e. runs at once
            (None: one per CPU of the process's share).
        timeout: seconds a ``/submit`` run may take when its ``config.run_timeout``
            is None (:data:`~llm_envs.sandbox.DEFAULT_TIMEOUT`, as ``run_tests``).
        max_timeout: the longest ``run_timeout`` a request may ask for, in seconds.
        memory_mb: address-space limit of a run, in MiB.
        output_limit: bytes of stdout and of stderr kept per run.
        max_program_chars: the most characters of a request's own program: a
            ``/run_code`` script's ``code``, ``stdin``, and each file's path and
            base64 content, added up; a ``/submit`` ``completion``. Past it: 422.
        max_body_bytes: the largest request body read (413 past it).
        max_queued: requests queued or running at once, all clients together
            (503 past it).
        max_queued_per_client: requests of one client queued or running at once
            (429 past it; a client is its address, see :mod:`~llm_envs.sandbox.service.fair`).
        max_queued_bytes: bodies of the requests being read or held, every
            route's (``/list_ids`` too), together (503 past it).
        max_queued_bytes_per_client: bodies of one client's requests (429
            past it): a client declaring large bodies and sending them slowly
            holds at most this much of ``max_queued_bytes``.
        site_packages: let scripts import installed third-party packages (numpy).
        pin_cpus: keep each pool worker and its runs on one CPU (None: the pool
            decides, see :class:`~llm_envs.sandbox.Sandbox`).
    """

    pool_workers: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_timeout: float = 300.0
    memory_mb: int = 1024
    output_limit: int = 1 << 20
    max_program_chars: int = 4 << 20
    max_body_bytes: int = 16 << 20
    max_queued: int = 1024
    max_queued_per_client: int = 256
    max_queued_bytes: int = 1 << 30
    max_queued_bytes_per_client: int = 128 << 20
    site_packages: bool = False
    pin_cpus: bool | None = None

    def __post_init__(self) -> None:
        if self.pool_workers is not None:
            check_int("pool_workers", self.pool_workers, minimum=1, maximum=4096)
        check_number(
            "max_timeout", self.max_timeout, minimum=0, maximum=MAX_TIMEOUT, open_minimum=True
        )
        check_number(
            "timeout", self.timeout, minimum=0, maximum=self.max_timeout, open_minimum=True
        )
        check_int("memory_mb", self.memory_mb, minimum=1)
        check_int("output_limit", self.output_limit, minimum=1, maximum=16 << 20)
        check_int("max_program_chars", self.max_program_chars, minimum=1 << 10, maximum=1 << 30)
        check_int("max_body_bytes", self.max_body_bytes, minimum=1 << 10, maximum=1 << 31)
        check_int("max_queued", self.max_queued, minimum=1, maximum=1 << 20)
        check_int("max_queued_per_client", self.max_queued_per_client, minimum=1, maximum=1 << 20)
        check_int(
            "max_queued_bytes", self.max_queued_bytes, minimum=self.max_body_bytes, maximum=1 << 40
        )
        check_int(
            "max_queued_bytes_per_client",
            self.max_queued_bytes_per_client,
            minimum=self.max_body_bytes,
            maximum=self.max_queued_bytes,
        )
        check_bool("site_packages", self.site_packages)
        if self.pin_cpus is not None:
            check_bool("pin_cpus", self.pin_cpus)

    def sandbox(self) -> Sandbox:
        """A pool with these settings (its workers started)."""
        return Sandbox(
            self.pool_workers,
            timeout=self.timeout,
            memory_mb=self.memory_mb,
            output_limit=self.output_limit,
            site_packages=self.site_packages,
            # A backstop the service's own count (max_program_chars) always passes: the
            # launcher (about 1.5 K) plus literals' escapes, at most 10 characters for
            # one (repr's \U0010ffff) and a file's tuple punctuation.
            max_program_chars=32 * self.max_program_chars + 4096,
            pin_cpus=self.pin_cpus,
        )


# --- SandboxFusion's request shapes ----------------------------------------------------------


class RunCodeRequest(BaseModel):
    """``POST /run_code``'s body, as SandboxFusion's.

    Other fields, e.g. verl's ``memory_limit_MB``, are ignored: a run's memory
    is the service's ``--memory-mb``.
    """

    model_config = ConfigDict(extra="ignore")

    code: str = Field(description="the script to run")
    language: str = Field(description="the language: only 'python' is served")
    compile_timeout: float = Field(10, description="unused: Python has no compile step")
    run_timeout: float = Field(10, description="wall-clock seconds the script may run")
    stdin: str | None = Field(None, description="what the script reads on its standard input")
    files: dict[str, str | None] = Field(
        default_factory=dict,
        description="relative path -> base64 content, written in the working directory first",
    )
    fetch_files: list[str] = Field(default_factory=list, description="not supported")


class TestConfig(BaseModel):
    """``config`` of a ``/submit`` request, as SandboxFusion's."""

    __test__ = False  # tell pytest this is not a test class
    model_config = ConfigDict(extra="ignore")

    dataset_type: str | None = None
    language: str | None = None
    locale: str | None = None
    is_fewshot: bool | None = None
    compile_timeout: float | None = None
    run_timeout: float | None = None
    custom_extract_logic: str | None = None
    provided_data: list[dict[str, Any]] | dict[str, Any] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class SubmitRequest(BaseModel):
    """``POST /submit``'s body: a completion for problem ``id`` of ``dataset``."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    id: int | str
    completion: str
    config: TestConfig = Field(default_factory=TestConfig)


class PromptsRequest(BaseModel):
    """``POST /get_prompts`` and ``/list_ids``: a page of a data set's problems."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    config: TestConfig = Field(default_factory=TestConfig)
    offset: int = 0
    limit: int = 1_000_000


class PromptByIdRequest(BaseModel):
    """``POST /get_prompt_by_id``: one problem."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    id: int | str
    config: TestConfig = Field(default_factory=TestConfig)


# --- SandboxFusion's answer shapes -------------------------------------------------------------


def response(
    status: RunStatus, message: str, run_result: dict[str, Any] | None, pod: str
) -> dict[str, Any]:
    return {
        "status": status,
        "message": message,
        "compile_result": None,
        "run_result": run_result,
        "executor_pod_name": pod,
        "files": {},
    }
