"""What a run's ``re.Match`` result becomes on the judge's side: a snapshot of its spans.

A match object cannot cross (its ``re`` and string would); its spans can.
:func:`._wire.decode` rebuilds one as a :class:`MatchSnapshot` (tested with
:mod:`._wire`). Standard library only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MatchSnapshot"]


class MatchSnapshot:
    """What a run's ``re.Match`` result became on the judge's side: its spans, frozen.

    It is truthy like a match and answers ``group``, ``groups``, ``groupdict``,
    ``span``, ``start``, ``end`` and indexing from the spans the run reported.
    """

    __slots__ = ("_names", "_spans", "endpos", "pattern", "pos", "string")

    def __init__(
        self,
        pattern: str | bytes,
        string: str | bytes,
        pos: int,
        endpos: int,
        spans: list[tuple[int, int]],
        names: dict[str, int],
    ) -> None:
        self.pattern = pattern
        self.string = string
        self.pos = pos
        self.endpos = endpos
        self._spans = spans
        self._names = names

    def _index(self, group: int | str) -> int:
        if type(group) is str and group in self._names:
            return self._names[group]
        if type(group) is int and 0 <= group < len(self._spans):
            return group
        raise IndexError("no such group")

    def span(self, group: int | str = 0) -> tuple[int, int]:
        """The (start, end) of ``group``; (-1, -1) if it did not take part."""
        return self._spans[self._index(group)]

    def start(self, group: int | str = 0) -> int:
        """Where ``group`` starts."""
        return self.span(group)[0]

    def end(self, group: int | str = 0) -> int:
        """Where ``group`` ends."""
        return self.span(group)[1]

    def group(self, *groups: int | str) -> Any:
        """The text of one group (the whole match by default), or a tuple of several."""
        texts = tuple(self._text(self._index(group)) for group in groups or (0,))
        return texts[0] if len(texts) == 1 else texts

    def groups(self, default: object = None) -> tuple[Any, ...]:
        """The text of every group but the whole match."""
        return tuple(self._text(i, default) for i in range(1, len(self._spans)))

    def groupdict(self, default: object = None) -> dict[str, Any]:
        """The text of every named group."""
        return {name: self._text(index, default) for name, index in self._names.items()}

    @property
    def lastindex(self) -> int | None:
        """The index of the last group that matched (as ``re.Match.lastindex`` approximates)."""
        matched = [i for i in range(1, len(self._spans)) if self._spans[i][0] >= 0]
        return max(matched, key=lambda i: self._spans[i][1]) if matched else None

    def _text(self, index: int, default: object = None) -> Any:
        start, end = self._spans[index]
        return default if start < 0 else self.string[start:end]

    def __getitem__(self, group: int | str) -> Any:
        return self.group(group)

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<re.Match object; span={self.span()!r}, match={self.group()!r}>"
