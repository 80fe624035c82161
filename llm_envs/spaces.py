"""Gymnasium spaces for text: any Unicode string, and a list of chat messages.

Gymnasium's :class:`~gymnasium.spaces.Text` is built for short alphanumeric
strings: its default charset rejects most text a model writes, ``min_length=1``
rejects the empty string, and a full-Unicode charset costs seconds and hundreds
of megabytes to build. The spaces here accept what a language model can emit
(any ``str`` without lone surrogates) and sample cheaply.

Observations of every environment are ``{"messages": ChatMessages}`` dicts: a
plain ``str`` observation trips PettingZoo's ``api_test`` (it reads
``observation.dtype``), while a dict whose text sits under a key other than
``"observation"`` passes it unchanged. Actions are :class:`UnicodeText`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Dict, Space, Text

from llm_envs.arguments import check_int

__all__ = ["ROLES", "SAMPLE_FRAGMENTS", "ChatMessages", "UnicodeText", "chat_observation_space"]

ROLES: tuple[str, ...] = ("system", "user", "assistant")
"""The chat roles an observation may contain."""

SAMPLE_FRAGMENTS: tuple[str, ...] = (
    "Agent 0 > Agent 1",
    "Agent 1 = Agent 2",
    "```",
    "<think>",
    "def f(x):\n    return x",
    "&amp;",
    "<",
    " é ü 😀 ",
    "\n",
)
"""The fragments :meth:`UnicodeText.sample` mixes in unless given others.

Random actions then exercise the parsers (unclosed tags, stray closers,
entities, code) rather than only plain words. An environment whose agents write
a format of their own puts its pieces first (the debate: its XML tags, see
:attr:`~llm_envs.text_env.TextEnvMixin.sample_fragments`).
"""


_SAMPLE_ALPHABET = "abcdefghijklmnopqrstuvwxyz ABC0123456789.,;:!?-_=+*/()[]{}'\"\n\t"


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_fragments(fragments: Sequence[str]) -> tuple[str, ...]:
    if (
        not isinstance(fragments, Sequence)
        or isinstance(fragments, str)
        or not all(isinstance(f, str) for f in fragments)
    ):
        raise TypeError(f"fragments must be a sequence of strings, got {fragments!r:.80}")
    if not fragments:
        raise ValueError("fragments must hold at least one string")
    return tuple(fragments)


class UnicodeText(Text):
    """Any Python string of at most ``max_length`` characters.

    The empty string and every Unicode character are allowed; lone surrogates
    (which cannot be encoded as UTF-8, so no tokenizer or API can carry them)
    are rejected. :meth:`sample` returns short strings that mix plain text with
    XML tag fragments, which makes it a useful source of garbage actions.

    Args:
        max_length: longest accepted string, in characters.
        sample_max_length: longest string :meth:`sample` returns.
        seed: seed for :meth:`sample`.
        fragments: the pieces :meth:`sample` mixes in (default
            :data:`SAMPLE_FRAGMENTS`); at least one string.

    Example:
        >>> space = UnicodeText(max_length=10)
        >>> space.contains("ünïcødé"), space.contains(""), space.contains("x" * 11)
        (True, True, False)
    """

    def __init__(
        self,
        max_length: int = 1_000_000,
        *,
        sample_max_length: int = 64,
        seed: int | np.random.Generator | None = None,
        fragments: Sequence[str] = SAMPLE_FRAGMENTS,
    ) -> None:
        check_int("max_length", max_length, minimum=0)
        check_int("sample_max_length", sample_max_length, minimum=0)
        self.fragments = _check_fragments(fragments)
        # Text's own charset machinery is bypassed by contains/sample below; a
        # tiny charset keeps its constructor cheap.
        super().__init__(max_length=max_length, min_length=0, charset="a", seed=seed)
        self.sample_max_length = min(sample_max_length, max_length)

    def contains(self, x: Any) -> bool:
        """Return whether ``x`` is a ``str`` within the length bound, without lone surrogates."""
        return isinstance(x, str) and len(x) <= self.max_length and not _has_lone_surrogate(x)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Return a short random string of text and XML fragments (``mask`` is unsupported)."""
        if mask is not None or probability is not None:
            raise ValueError("UnicodeText.sample does not support mask or probability")
        rng = self.np_random
        parts: list[str] = []
        target = int(rng.integers(0, self.sample_max_length + 1))
        while sum(map(len, parts)) < target:
            if rng.random() < 0.4:
                parts.append(self.fragments[int(rng.integers(len(self.fragments)))])
            else:
                n = int(rng.integers(1, 8))
                idx = rng.integers(0, len(_SAMPLE_ALPHABET), size=n)
                parts.append("".join(_SAMPLE_ALPHABET[i] for i in idx))
        return "".join(parts)[: self.sample_max_length]

    @property
    def is_np_flattenable(self) -> bool:
        """Text has no fixed-size numeric flattening."""
        return False

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length

    def __hash__(self) -> int:
        return hash(("UnicodeText", self.max_length))


class ChatMessages(Space[list[dict[str, str]]]):
    """A list of ``{"role": ..., "content": ...}`` chat messages.

    ``role`` is one of :data:`ROLES`; ``content`` is any string accepted by
    :class:`UnicodeText`. This is the observation an environment hands an
    agent: the chat its model should continue.

    Args:
        max_messages: longest accepted list.
        max_content_length: longest accepted message content, in characters.
        seed: seed for :meth:`sample`.
        fragments: the pieces the sampled contents mix in (see :class:`UnicodeText`).

    Example:
        >>> ChatMessages().contains([{"role": "user", "content": "2 + 2?"}])
        True
        >>> ChatMessages().contains([{"role": "narrator", "content": "hi"}])
        False
    """

    def __init__(
        self,
        max_messages: int = 10_000,
        max_content_length: int = 1_000_000,
        seed: int | np.random.Generator | None = None,
        *,
        fragments: Sequence[str] = SAMPLE_FRAGMENTS,
    ) -> None:
        check_int("max_messages", max_messages, minimum=0)
        self.max_messages = max_messages
        self.content = UnicodeText(max_content_length, fragments=fragments)
        super().__init__(shape=None, dtype=None, seed=seed)

    def seed(self, seed: int | None = None) -> list[int]:
        """Seed this space and its content space."""
        seeds = super().seed(seed)
        content_seed = int(self.np_random.integers(2**31))
        self.content.seed(content_seed)
        return [*seeds, content_seed] if isinstance(seeds, list) else [seeds, content_seed]

    def contains(self, x: Any) -> bool:
        """Return whether ``x`` is a list of well-formed chat messages."""
        if not isinstance(x, list) or len(x) > self.max_messages:
            return False
        return all(
            isinstance(m, Mapping)
            and set(m.keys()) == {"role", "content"}
            and m["role"] in ROLES
            and self.content.contains(m["content"])
            for m in x
        )

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, str]]:
        """Return a short random conversation (``mask`` is unsupported)."""
        if mask is not None or probability is not None:
            raise ValueError("ChatMessages.sample does not support mask or probability")
        n = int(self.np_random.integers(1, min(4, self.max_messages) + 1))
        roles: Sequence[str] = ROLES
        return [
            {
                "role": roles[int(self.np_random.integers(len(roles)))],
                "content": self.content.sample(),
            }
            for _ in range(n)
        ]

    @property
    def is_np_flattenable(self) -> bool:
        """Chat messages have no fixed-size numeric flattening."""
        return False

    def __repr__(self) -> str:
        return f"ChatMessages(max_messages={self.max_messages})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ChatMessages)
            and other.max_messages == self.max_messages
            and other.content == self.content
        )

    def __hash__(self) -> int:
        return hash(("ChatMessages", self.max_messages, self.content.max_length))


def chat_observation_space(fragments: Sequence[str] = SAMPLE_FRAGMENTS) -> Dict:
    """Return the observation space of every environment: ``{"messages": ChatMessages}``.

    ``fragments`` are the pieces its sampled message contents mix in (see :class:`UnicodeText`).
    """
    return Dict({"messages": ChatMessages(fragments=fragments)})
