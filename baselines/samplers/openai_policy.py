"""Sampling from any OpenAI-compatible server: a ``vllm serve`` elsewhere, or a hosted model.

Two ways to talk to the server, chosen by whether a tokenizer is given:

* With a tokenizer (the trainable path): prompts are rendered here with the
  chat template and sent as token ids to ``/v1/completions``; the server is
  asked for each sampled token's id and logprob (vLLM's
  ``return_tokens_as_token_ids``). The completion is then exactly what a
  local sampler would return, and a trainer can use it.
* Without one (fixed opponents, the code environment's expert): the chat is
  sent to ``/v1/chat/completions`` and only text matters. Token ids and
  logprobs are returned when the server provides them, else left empty.

Requests run concurrently on a thread pool; the standard library's HTTP
client keeps the dependency list empty.

Failures: a request that fails in a way that may pass (HTTP 429 "too many
requests", 408, any 5xx, a refused or dropped connection, a timeout) is tried
again, up to ``retries`` attempts in all, after exponential backoff
(``backoff * 2**k`` seconds, at most ``max_backoff``, or the server's
``Retry-After`` when it sends one, within the same cap). Any other 4xx is the
caller's mistake and raises at once. Either way the :class:`ServerError` names
the URL, the status and what the server said.

The API key: ``api_key``, else the environment variable named by
``api_key_env`` (``OPENAI_API_KEY`` by default). It is sent as a bearer token
and never shown: not in ``repr``, not in an error message.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from baselines.samplers.base import (
    ChatRenderer,
    Completion,
    SampleRequest,
    SamplingParams,
    finished_text,
)

__all__ = ["OpenAIPolicy", "ServerError"]


class ServerError(RuntimeError):
    """The server answered with an error, or not at all after the retries."""


_RETRIED_STATUS = frozenset({408, 429})  # and every 5xx


def _token_id(token: str) -> int | None:
    # vLLM writes sampled tokens as "token_id:1234" when asked to.
    if token.startswith("token_id:"):
        try:
            return int(token.removeprefix("token_id:"))
        except ValueError:
            return None
    return None


class OpenAIPolicy:
    """A :class:`~baselines.samplers.base.Policy` over an OpenAI-compatible HTTP API.

    Args:
        base_url: the API root, e.g. ``"http://127.0.0.1:8000/v1"``.
        model: the model name the server knows.
        tokenizer: the model's tokenizer, to send token prompts and get token
            completions (see the module docstring); ``None`` for text only.
        api_key: bearer token; None reads the variable ``api_key_env``.
        api_key_env: the environment variable holding the key (None: no key
            unless ``api_key`` is given).
        max_concurrency: requests in flight at once.
        timeout: seconds per HTTP request.
        retries: attempts per request, the first included, on errors that
            may pass (see the module docstring).
        backoff: seconds before the second attempt; doubled before each next one.
        max_backoff: the longest wait between two attempts, in seconds.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        tokenizer: Any | None = None,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_concurrency: int = 16,
        timeout: float = 300.0,
        retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if max_concurrency < 1 or retries < 1:
            raise ValueError(
                f"max_concurrency and retries must be >= 1, got {max_concurrency} and {retries}"
            )
        if not (backoff >= 0 and max_backoff >= 0):
            raise ValueError(
                f"backoff and max_backoff must be >= 0 seconds, got {backoff} and {max_backoff}"
            )
        if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env):
            raise ValueError(
                f"api_key_env must name an environment variable, got {api_key_env!r}: "
                "e.g. OPENAI_API_KEY, or None for no key"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.renderer = ChatRenderer(tokenizer) if tokenizer is not None else None
        self.api_key_env = api_key_env
        if api_key is None and api_key_env is not None:
            api_key = os.environ.get(api_key_env)
        self._api_key = api_key
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    @property
    def api_key(self) -> str | None:
        """The bearer token sent with every request (never part of ``repr`` or errors)."""
        return self._api_key

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"OpenAIPolicy({self.base_url!r}, {self.model!r}, api_key={key})"

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        """Send every request concurrently; return completions in request order."""
        if not requests:
            return []
        workers = min(self.max_concurrency, len(requests))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda ir: self._one(ir[0], ir[1], params), enumerate(requests)))

    def _one(self, index: int, request: SampleRequest, params: SamplingParams) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "n": 1,
        }
        if request.stop:
            body["stop"] = list(request.stop)
            body["include_stop_str_in_output"] = True  # vLLM; other servers ignore it
        if params.seed is not None:
            body["seed"] = params.seed + index
        if self.renderer is not None:
            prompt = self.renderer(request.messages)
            body.update(prompt=list(prompt), logprobs=0, return_tokens_as_token_ids=True)
            choice = self._post("/completions", body)["choices"][0]
            text = choice.get("text") or ""
            lp = choice.get("logprobs") or {}
            raw_tokens, raw_logprobs = lp.get("tokens") or [], lp.get("token_logprobs") or []
        else:
            prompt = ()
            body.update(
                messages=[dict(m) for m in request.messages],
                logprobs=True,
                return_tokens_as_token_ids=True,
            )
            choice = self._post("/chat/completions", body)["choices"][0]
            text = (choice.get("message") or {}).get("content") or ""
            content = (choice.get("logprobs") or {}).get("content") or []
            raw_tokens = [c.get("token", "") for c in content]
            raw_logprobs = [c.get("logprob") for c in content]
        ids = [_token_id(t) for t in raw_tokens]
        if ids and all(i is not None for i in ids) and len(raw_logprobs) == len(ids):
            tokens = tuple(int(i) for i in ids if i is not None)
            logprobs = tuple(float(x) for x in raw_logprobs)
        elif self.renderer is not None:
            raise ServerError(
                f"{self.base_url} did not return sampled token ids and logprobs; a trainable "
                "OpenAIPolicy needs a server that supports return_tokens_as_token_ids (vLLM), "
                "or build it without a tokenizer for text-only sampling"
            )
        else:
            tokens, logprobs = (), ()
        text, reason = finished_text(text, request.stop, choice.get("finish_reason"))
        return Completion(tuple(prompt), tokens, logprobs, text, reason)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        url = self.base_url + path
        last_error = ""
        for attempt in range(self.retries):
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            wait = min(self.backoff * 2.0**attempt, self.max_backoff)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return dict(json.loads(response.read()))
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace")[:500]
                if exc.code < 500 and exc.code not in _RETRIED_STATUS:
                    hint = self._hint(exc.code)
                    raise ServerError(f"POST {url} -> {exc.code}: {detail}{hint}") from exc
                last_error = f"HTTP {exc.code}: {detail}"
                wait = _retry_after(exc, default=wait, cap=self.max_backoff)
            except (
                urllib.error.URLError,
                http.client.HTTPException,
                TimeoutError,
                ConnectionError,
            ) as exc:
                last_error = f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
            except json.JSONDecodeError as exc:
                last_error = f"the answer is not JSON ({exc})"
            if attempt + 1 < self.retries:
                time.sleep(wait)
        raise ServerError(
            f"POST {url} failed after {self.retries} attempts; the last one: {last_error}. "
            "Check that the server is up and serves this URL (more attempts: retries=...)"
        )

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            where = f"the {self.api_key_env} variable" if self.api_key_env else "api_key="
            return f" (check the API key in {where})"
        if status == 404:
            return f" (check the base URL and the model name {self.model!r})"
        return ""


def _retry_after(error: urllib.error.HTTPError, *, default: float, cap: float) -> float:
    """The server's ``Retry-After`` in seconds (within ``cap``), else ``default``."""
    value = error.headers.get("Retry-After") if error.headers else None
    try:
        seconds = float(value) if value is not None else default
    except ValueError:  # an HTTP date: not worth parsing for a short wait
        seconds = default
    return min(max(seconds, 0.0), cap)
