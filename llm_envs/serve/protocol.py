"""The episode server's wire format: request bodies, the messages a seat receives, JSON.

Requests are pydantic models that refuse unknown fields, so a typo is a 422
naming the field. A seat receives these messages (``type`` first), over its
WebSocket or from ``GET .../turn``:

* ``joined``: the seat is the client's; ``token`` rejoins it after a reconnect.
* ``turn``: the seat must act; ``observation`` and ``info`` are the
  environment's, ``reward`` is what the seat was paid since its previous action.
* ``accepted``: the action of turn ``turn`` was taken.
* ``end``: the seat's episode is over; ``reward`` as in ``turn``, ``return``
  the seat's whole return.
* ``abandoned``: the seat did not act in time; the server plays ``""`` for it.
* ``wait`` (``GET .../turn`` only): nothing to do yet; ``waiting_for`` names
  the seats that must act first.
* ``error``: a refused message, with its HTTP ``status`` and ``detail``.

Nothing here knows the environments: observations and infos pass through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

__all__ = [
    "ActMessage",
    "ActRequest",
    "EpisodeRequest",
    "Message",
    "accepted",
    "dumps",
    "error",
    "validation_message",
]

Message = dict[str, Any]
"""One message to a seat: a JSON object whose ``type`` says what it is."""


class EpisodeRequest(BaseModel):
    """An episode to create: which environment, with which settings, which problem.

    Fields left out take the server's defaults (``--env``, ``--env-kwargs``,
    ``--task``, ``--task-kwargs``) when ``env`` is the default env or left out;
    the ``env_kwargs`` and ``task_kwargs`` given are laid over the defaults', and
    must be settings the family lets a client pass, within their bounds
    (:mod:`llm_envs.client_settings`). The episode is the family's evaluation
    episode ``problem`` (:meth:`llm_envs.family.Family.eval_episode`), reset
    with ``seed``.
    """

    model_config = ConfigDict(extra="forbid")

    env: StrictStr | None = Field(
        default=None, max_length=200, description="a registered family: debate, textarena, ..."
    )
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="the env's arguments")
    task: StrictStr | None = Field(
        default=None, max_length=200, description="the family's task; default its first"
    )
    task_kwargs: dict[str, Any] = Field(default_factory=dict, description="the task's settings")
    problem: StrictInt = Field(
        default=0, ge=0, lt=2**63, description="the evaluation problem's index"
    )
    seed: StrictInt = Field(default=0, ge=0, lt=2**63, description="the episode's seed")


class ActRequest(BaseModel):
    """A seat's action: its text, verbatim (any string; the environment scores it)."""

    model_config = ConfigDict(extra="forbid")

    text: StrictStr = Field(description="the agent's raw text")
    turn: StrictInt | None = Field(
        default=None, description="the turn acted on (from the turn message): refused when stale"
    )


class ActMessage(ActRequest):
    """An action sent over a seat's WebSocket: ``{"type": "act", "text": ...}``."""

    type: Literal["act"]


_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any) -> str:
    r"""JSON text of ``value``; numpy values become numbers, sets lists, anything else text.

    Records and infos are plain JSON by the environment contract; this keeps a
    stray numpy float in an info from failing a whole response. The text is
    always valid UTF-8: a lone surrogate (any client may send ``"\ud800"``)
    is written as its JSON escape, which parses back to the same text.

    Example:
        >>> import numpy as np
        >>> dumps({"reward": np.float32(0.5), "seats": {"agent_0"}})
        '{"reward": 0.5, "seats": ["agent_0"]}'
        >>> dumps(["é", "\ud800"]), json.loads(dumps(["\ud800"])) == ["\ud800"]
        ('["é", "\\ud800"]', True)
    """
    text = json.dumps(value, default=_plain, ensure_ascii=False)
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _plain(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def accepted(episode: str, seat: str, turn: int) -> Message:
    """The reply to an action the server took."""
    return {"type": "accepted", "episode": episode, "seat": seat, "turn": turn}


def error(status: int, detail: str) -> Message:
    """A refused message, with the HTTP status the same request would get."""
    return {"type": "error", "status": status, "detail": detail}


def validation_message(errors: Iterable[Mapping[str, Any]], expected: str) -> str:
    """Pydantic's errors in one line: each bad field, what is wrong, and the expected shape.

    Example:
        >>> from pydantic import ValidationError
        >>> try:
        ...     ActRequest.model_validate({"txt": "hi"})
        ... except ValidationError as exc:
        ...     print(validation_message(exc.errors(), '{"text": "..."}'))
        text: Field required; txt: Extra inputs are not permitted; send {"text": "..."}
    """
    parts = []
    for problem in errors:
        where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
        parts.append(f"{where or 'body'}: {problem.get('msg', 'invalid')}")
    return f"{'; '.join(parts)}; send {expected}"
