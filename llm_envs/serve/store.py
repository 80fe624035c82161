"""Finished episodes, kept in ``<records>/episodes.jsonl`` and read back at start-up.

Each finished episode is one JSON line, appended and flushed to the disk
(``fsync``) before the episode counts as finished, so a server that crashes
loses at most the line it was writing. At start-up the file is read back
(an index of each line's place, not the lines themselves), so
``GET /episodes/{id}`` answers for episodes of earlier runs. A line that is
not JSON (the last one, cut short by a crash mid-write) is skipped with a
warning, never fatal; the next record starts on a line of its own.

Without a directory the records live in memory, as their JSON text, the
latest :data:`MEMORY_BYTES` characters of them (the oldest are dropped).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llm_envs.serve.protocol import dumps

__all__ = ["MEMORY_BYTES", "RECORDS_FILE", "EpisodeStore", "utc_now"]

RECORDS_FILE = "episodes.jsonl"
"""The file, in the records directory, that holds one finished episode per line."""

MEMORY_BYTES = 256 << 20
"""Characters of records' JSON a store without a directory keeps (the latest; at least one).

Unbounded, one client playing debates of 1 MiB actions one after another grew
the server by about 15 MiB per episode until the machine ran out."""

log = logging.getLogger(__name__)


class EpisodeStore:
    """Finished episodes by id: appended to a JSON-lines file, or held in memory.

    Args:
        directory: where ``episodes.jsonl`` lives (created if missing); None
            keeps the records in memory only.
        memory_bytes: without a directory, the characters of JSON kept: the
            latest records within it (always the latest one), the older dropped.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> EpisodeStore(folder).append({"id": "e1", "returns": {"agent_0": 1.0}})
        >>> EpisodeStore(folder).get("e1")  # a new store reads the file back
        {'id': 'e1', 'returns': {'agent_0': 1.0}}
    """

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, memory_bytes: int = MEMORY_BYTES
    ) -> None:
        self.path = Path(directory) / RECORDS_FILE if directory is not None else None
        self.memory_bytes = memory_bytes
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, str] = OrderedDict()  # id -> the record's JSON
        self._memory_size = 0
        self._places: dict[str, tuple[int, int]] = {}  # id -> (offset, length) in the file
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._load(self.path)

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._places or episode_id in self._memory

    def __len__(self) -> int:
        return len(self._places) + len(self._memory)

    def append(self, entry: dict[str, Any]) -> None:
        """Keep a finished episode (``entry["id"]`` names it); on disk when this returns."""
        episode_id = str(entry["id"])
        if self.path is None:
            text = dumps(entry)
            with self._lock:
                self._memory_size -= len(self._memory.pop(episode_id, ""))
                self._memory[episode_id] = text
                self._memory_size += len(text)
                while self._memory_size > self.memory_bytes and len(self._memory) > 1:
                    self._memory_size -= len(self._memory.popitem(last=False)[1])
            return
        # A lone surrogate (a client's JSON "\ud800") has no UTF-8 form: it is written
        # as its JSON escape, which reads back as the same text (as the run directory does).
        line = (dumps(entry) + "\n").encode("utf-8", "backslashreplace")
        with self._lock, self.path.open("ab") as file:
            offset = file.tell()
            file.write(line)
            file.flush()
            os.fsync(file.fileno())
            self._places[episode_id] = (offset, len(line))

    def get(self, episode_id: str) -> dict[str, Any] | None:
        """The finished episode ``episode_id``, or None."""
        if self.path is None:
            with self._lock:
                text = self._memory.get(episode_id)
            return json.loads(text) if text is not None else None
        place = self._places.get(episode_id)
        if place is None:
            return None
        with self.path.open("rb") as file:
            file.seek(place[0])
            found: dict[str, Any] = json.loads(file.read(place[1]))
        return found

    def _load(self, path: Path) -> None:
        """Index the file's lines; skip those that are not an episode; end it with a newline."""
        if not path.exists():
            return
        offset, last = 0, b""
        with path.open("rb") as file:
            for number, line in enumerate(file, start=1):
                episode_id = _episode_id(line)
                if episode_id is None:
                    cut = "" if line.endswith(b"\n") else " and cut short (a crash mid-write?)"
                    log.warning("%s line %d is not an episode record%s: skipped", path, number, cut)
                else:
                    self._places[episode_id] = (offset, len(line))
                offset += len(line)
                last = line
        if last and not last.endswith(b"\n"):
            with path.open("ab") as file:  # the next record must not continue the cut line
                file.write(b"\n")
                file.flush()
                os.fsync(file.fileno())


def _episode_id(line: bytes) -> str | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return str(entry["id"]) if isinstance(entry, dict) and "id" in entry else None


def utc_now() -> str:
    """The time now, as a record's ``started`` and ``finished`` show it (ISO 8601, UTC)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")
