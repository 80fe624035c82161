"""The models of an evaluation, written as short specs, and the samplers that play them.

An *entrant* is a model with its sampling settings and a name. On the command
line each is one spec::

    [NAME=]MODEL[@KEY=VALUE,...]

``MODEL`` is ``tiny``, ``smollm2-135m-instruct``, a local checkpoint folder or
a Hugging Face model id (see :func:`baselines.models.resolve_model`), the
base URL of an OpenAI-compatible server with the model name after ``#``:
``http://127.0.0.1:8000/v1#Qwen/Qwen2.5-0.5B-Instruct`` (without ``#``, the
one model the server lists), ``reference`` (:data:`REFERENCE`): the
family's reference players (a debate: a scripted debater that knows each
question's answer and votes by it; TicTacToe: the minimax player), no model
at all, or ``scripted:SET``, a set of the family's scripted players
(:meth:`llm_envs.capabilities.ScriptedPlayers.scripted_players`; a game's random player:
``scripted:random``).
``KEY=VALUE`` pairs override the evaluation's sampling settings for this
entrant: ``temperature``, ``top_p``, ``max_tokens``. ``NAME`` names it in
tables and results (default: the spec itself), so one model at two
temperatures is two entrants::

    cold=smollm2-135m-instruct@temperature=0.3  hot=smollm2-135m-instruct@temperature=1.5

Parsing is pure (:func:`parse_entrant`); :func:`build_policies` loads the
models: a local model once per folder, shared by the entrants that differ only
in sampling settings (transformers' ``generate``, CPU or GPU); a server
through :class:`~baselines.samplers.openai_policy.OpenAIPolicy` (text only),
with the API key read from the environment variable the caller names, never
from the spec, so it is never written to a results file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from baselines.env_families import derive_seed
from baselines.samplers.base import Completion, Policy, SampleRequest, SamplingParams

__all__ = [
    "REFERENCE",
    "SAMPLING_KEYS",
    "SCRIPTED",
    "Entrant",
    "EntrantPolicy",
    "build_policies",
    "parse_entrant",
    "parse_entrants",
]

SAMPLING_KEYS: Final = ("temperature", "top_p", "max_tokens")
"""The sampling settings an entrant may override after ``@``."""

REFERENCE: Final = "reference"
"""The model name of the scripted entrant that knows the reference answers (debate only)."""

SCRIPTED: Final = "scripted:"
"""The prefix of a scripted entrant: ``scripted:SET``, a set of the family's scripted players."""

_NAME = re.compile(r"^([A-Za-z0-9_.\-]+)=(.*)$", re.DOTALL)
_OPTIONS = re.compile(r"^[A-Za-z_]+=[^,=]*(,[A-Za-z_]+=[^,=]*)*$")
_FORM = "[NAME=]MODEL[@temperature=T,top_p=P,max_tokens=N]"


@dataclass(frozen=True)
class Entrant:
    """One model of an evaluation, as a spec names it.

    Attributes:
        name: What tables and results call it.
        model: The model as given: a built-in name, folder or Hugging Face id,
            or a server's base URL (without the ``#model`` part).
        served_model: The model name to request from a server (after ``#``);
            None: the one model the server lists (or a local model).
        sampling: ``(key, value)`` overrides of the sampling settings, keys
            from :data:`SAMPLING_KEYS`.
    """

    name: str
    model: str
    served_model: str | None = None
    sampling: tuple[tuple[str, float | int], ...] = ()

    @property
    def is_endpoint(self) -> bool:
        """Whether it is played by an OpenAI-compatible server."""
        return self.model.startswith(("http://", "https://"))

    @property
    def is_scripted(self) -> bool:
        """Whether the environment's scripted players play it (``reference``, ``scripted:SET``)."""
        return self.model == REFERENCE or self.model.startswith(SCRIPTED)

    @property
    def spec(self) -> str:
        """The spec that :func:`parse_entrant` reads back into this entrant."""
        model = self.model + (f"#{self.served_model}" if self.served_model else "")
        options = ",".join(f"{k}={v}" for k, v in self.sampling)
        body = model + (f"@{options}" if options else "")
        return body if self.name == body else f"{self.name}={body}"

    def sampling_params(self, base: SamplingParams) -> SamplingParams:
        """``base`` with this entrant's overrides."""
        overrides: dict[str, Any] = dict(self.sampling)
        return replace(base, **overrides) if overrides else base


def parse_entrant(text: str) -> Entrant:
    """Read one entrant spec (module docstring).

    Raises:
        ValueError: an empty spec or model, an unknown or bad sampling setting;
            the message shows the form of a spec.

    Example:
        >>> e = parse_entrant("hot=smollm2-135m-instruct@temperature=1.5")
        >>> e.name, e.model, e.sampling
        ('hot', 'smollm2-135m-instruct', (('temperature', 1.5),))
        >>> e = parse_entrant("http://127.0.0.1:8000/v1#tiny")
        >>> e.name, e.model, e.served_model, e.is_endpoint
        ('http://127.0.0.1:8000/v1#tiny', 'http://127.0.0.1:8000/v1', 'tiny', True)
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a model spec must be non-empty text of the form {_FORM}, got {text!r}")
    text = text.strip()
    named = _NAME.match(text)
    name, rest = (named.group(1), named.group(2)) if named else (text, text)
    sampling: tuple[tuple[str, float | int], ...] = ()
    head, at, tail = rest.rpartition("@")
    if at and _OPTIONS.match(tail):
        sampling = _sampling(tail, text)
        rest = head
    model, served = rest, ""
    if rest.startswith(("http://", "https://")):
        model, _, served = rest.partition("#")
    if not model.strip():
        raise ValueError(f"model spec {text!r} names no model; write {_FORM}")
    if (model == REFERENCE or model.startswith(SCRIPTED)) and sampling:
        raise ValueError(
            f"model spec {text!r}: {model!r} is scripted and samples nothing; "
            f"write {model} without '@...'"
        )
    if "#" in model and not model.startswith(("http://", "https://")):
        raise ValueError(
            f"model spec {text!r}: '#MODEL' follows a server URL only (http://HOST:PORT/v1#MODEL)"
        )
    return Entrant(name, model, served or None, sampling)


def _sampling(options: str, text: str) -> tuple[tuple[str, float | int], ...]:
    values: dict[str, float | int] = {}
    for pair in options.split(","):
        key, _, raw = pair.partition("=")
        if key not in SAMPLING_KEYS:
            raise ValueError(
                f"model spec {text!r}: unknown sampling setting {key!r}; the settings are "
                f"{list(SAMPLING_KEYS)}, e.g. tiny@temperature=0.7,max_tokens=64"
            )
        try:
            value: float | int = int(raw) if key == "max_tokens" else float(raw)
        except ValueError:
            kind = "an int" if key == "max_tokens" else "a number"
            raise ValueError(f"model spec {text!r}: {key} must be {kind}, got {raw!r}") from None
        values[key] = value
    try:
        SamplingParams(**values)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ValueError(f"model spec {text!r}: {exc}") from None
    return tuple(values.items())


def parse_entrants(texts: Sequence[str]) -> tuple[Entrant, ...]:
    """Read every spec; names must be unique.

    Raises:
        ValueError: no spec, a bad spec, or two entrants with one name (the
            message says how to name them).

    Example:
        >>> [e.name for e in parse_entrants(["tiny", "base=tiny@temperature=0.5"])]
        ['tiny', 'base']
    """
    if isinstance(texts, str):
        raise ValueError(
            f"models must be a list of specs, got one str {texts!r}: write [{texts!r}]"
        )
    if not texts:
        raise ValueError(f"give at least one model: {_FORM}")
    entrants = tuple(parse_entrant(t) for t in texts)
    seen: dict[str, str] = {}
    for entrant, text in zip(entrants, texts, strict=True):
        if entrant.name in seen:
            raise ValueError(
                f"two models are named {entrant.name!r} ({seen[entrant.name]!r} and {text!r}); "
                "name each one, e.g. a=tiny b=tiny@temperature=1.5"
            )
        seen[entrant.name] = text
    return entrants


class EntrantPolicy:
    """An entrant's sampler: its model's policy with its own sampling settings and seeds.

    Entrants sharing a model share ``inner``; each gets its overrides and a
    seed of its own (``derive_seed(seed, index)``), so two entrants never draw
    the same random numbers.

    Args:
        inner: the model's policy.
        entrant: the entrant (its sampling overrides).
        index: its position among the entrants (seeds its sampling).
    """

    def __init__(self, inner: Policy, entrant: Entrant, index: int) -> None:
        self.inner = inner
        self.entrant = entrant
        self.index = index

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        """Sample with this entrant's settings."""
        params = self.entrant.sampling_params(params)
        if params.seed is not None:
            params = replace(params, seed=derive_seed(params.seed, self.index))
        return self.inner.sample(requests, params)


def build_policies(
    entrants: Sequence[Entrant],
    *,
    device: str = "cpu",
    api_key_env: str | None = "OPENAI_API_KEY",
    concurrency: int = 8,
    retries: int = 5,
    timeout: float = 300.0,
    loaded: Mapping[str, Policy] | None = None,
) -> dict[str, Policy]:
    """A sampler per entrant name: local models loaded once per folder, servers over HTTP.

    Args:
        entrants: the entrants.
        device: where local models run (``cpu``, ``cuda``...).
        api_key_env: the environment variable holding the servers' API key;
            None sends none. The key is read here and kept in memory only.
        concurrency: requests in flight at once per server.
        retries: attempts per request (HTTP 429, 5xx, connection errors).
        timeout: seconds per HTTP request.
        loaded: policies already built, by model (``Entrant.model``): used
            instead of loading (tests, or a model already in memory).

    Raises:
        FileNotFoundError: a local path that is not a model folder.
        ValueError: a server that lists several models when the spec names none.
    """
    from baselines.models import resolve_model

    models: dict[str, Policy] = dict(loaded or {})
    api_key = os.environ.get(api_key_env) if api_key_env else None
    policies: dict[str, Policy] = {}
    for index, entrant in enumerate(entrants):
        if entrant.model in models:
            key = entrant.model
        elif entrant.is_scripted:
            raise ValueError(
                f"{entrant.model!r} is played by the environment's scripted players, not loaded: "
                f"pass loaded={{{entrant.model!r}: "
                f"make_arena(...).scripted({entrant.model!r}, seed)}} (Evaluation does)"
            )
        elif entrant.is_endpoint:
            key = f"{entrant.model}#{entrant.served_model or ''}"
            if key not in models:
                models[key] = _endpoint_policy(
                    entrant,
                    api_key=api_key,
                    concurrency=concurrency,
                    retries=retries,
                    timeout=timeout,
                )
        else:
            key = resolve_model(entrant.model)  # "tiny" and its folder are one model
            if key not in models:
                models[key] = _local_policy(key, device)
        policies[entrant.name] = EntrantPolicy(models[key], entrant, index)
    return policies


def _endpoint_policy(
    entrant: Entrant, *, api_key: str | None, concurrency: int, retries: int, timeout: float
) -> Policy:
    from baselines.samplers.build import served_model_name
    from baselines.samplers.openai_policy import OpenAIPolicy

    served = entrant.served_model or served_model_name(entrant.model, "")
    if not served:
        raise ValueError(
            f"model {entrant.model!r}: the server does not list exactly one model (or did not "
            f"answer); name the one to use: {entrant.model}#MODEL_NAME"
        )
    return OpenAIPolicy(
        entrant.model,
        served,
        api_key=api_key,
        max_concurrency=concurrency,
        retries=retries,
        timeout=timeout,
    )


def _local_policy(path: str, device: str) -> Any:
    from baselines.samplers.transformers_policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(path, device=device)
    policy.model.requires_grad_(False)
    return policy
