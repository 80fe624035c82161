"""Finished episodes, kept in ``<records>/episodes.jsonl`` and read back at start-up.

Each finished episode is one JSON line, appended and flushed to the disk
(``fsync``) before the episode counts as finished, so a server that crashes
loses at most the line it was writing. At start-up the file is read back
(an index of each line's place, not the lines themselves), so
``GET /episodes/{id}`` answers for episodes of earlier runs. A line that is
not JSON (the last one, cut short by a crash mid-write) is skipped with a
warning, never fatal; the next record starts on a line of its own.

The file is bounded (:data:`MAX_RECORDS_BYTES`): once it holds that many
bytes, :meth:`EpisodeStore.check_room` refuses new episodes, so that a full
disk never turns the episodes that run then into lost records, and start-up
(one pass over the file, a line at a time) takes time bounded by the bound.
One client's records written since start-up may fill a quarter of it; past
that, that client's new episodes are refused and the others' are not, so one
client alone cannot close the server to everyone.

Without a directory the records live in memory, as their JSON text, the
latest :data:`MEMORY_BYTES` characters of them. Past it the oldest go, but a
client's records are kept from other clients: a client holding more than its
share (a quarter) only drops its own, so one client's many big episodes
cannot push out another's record.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llm_envs.sandbox.fair import current_client, tally
from llm_envs.serve.errors import Unavailable
from llm_envs.serve.protocol import dumps

__all__ = ["MAX_RECORDS_BYTES", "MEMORY_BYTES", "RECORDS_FILE", "EpisodeStore", "utc_now"]

RECORDS_FILE = "episodes.jsonl"
"""The file, in the records directory, that holds one finished episode per line."""

MEMORY_BYTES = 256 << 20
"""Characters of records' JSON a store without a directory keeps (the latest; at least one).

Unbounded, one client playing debates of 1 MiB actions one after another grew
the server by about 15 MiB per episode until the machine ran out."""

MAX_RECORDS_BYTES = 4 << 30
"""Bytes of ``episodes.jsonl`` past which new episodes are refused (503, ``--max-records-bytes``).

Unbounded, one client wrote 25 MB/s of records until the disk was full, and
then every client's episode ended with its record lost; start-up reads the
file back at 20 to 200 MB/s (measured, loaded and idle): 4 GiB is 20 s to 3.5 minutes."""

log = logging.getLogger(__name__)


class EpisodeStore:
    """Finished episodes by id: appended to a JSON-lines file, or held in memory.

    A record belongs to the client its :meth:`append` runs as
    (:func:`~llm_envs.sandbox.fair.current_client`; the hub appends as the
    client that sent most of the episode's characters, its creator on a tie).

    Args:
        directory: where ``episodes.jsonl`` lives (created if missing); None
            keeps the records in memory only.
        memory_bytes: without a directory, the characters of JSON kept: the
            latest records within it (always the latest one), the older dropped,
            a client past a quarter of it dropping its own first.
        max_bytes: with a directory, the file's size past which
            :meth:`check_room` refuses new episodes (the episodes running then
            still write theirs); a client whose records written since start-up
            hold a quarter of it is refused too.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> EpisodeStore(folder).append({"id": "e1", "returns": {"agent_0": 1.0}})
        >>> EpisodeStore(folder).get("e1")  # a new store reads the file back
        {'id': 'e1', 'returns': {'agent_0': 1.0}}
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        memory_bytes: int = MEMORY_BYTES,
        max_bytes: int = MAX_RECORDS_BYTES,
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_records_bytes must be >= 1, got {max_bytes}")
        self.path = Path(directory) / RECORDS_FILE if directory is not None else None
        self.memory_bytes = memory_bytes
        self.memory_share = max(1, memory_bytes // 4)
        self.max_bytes = max_bytes
        self.size = 0  # bytes of the file
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, tuple[str, str]] = OrderedDict()  # id -> (client, JSON)
        self._memory_size = 0
        self._mine: dict[str, dict[str, None]] = {}  # client -> its records' ids, oldest first
        self._sizes: dict[str, int] = {}  # client -> characters of its records
        self._over: dict[str, None] = {}  # clients past their share (a few: each holds a quarter)
        self._places: dict[str, tuple[int, int]] = {}  # id -> (offset, length) in the file
        self.file_share = max(1, max_bytes // 4)
        self._written: dict[str, int] = {}  # client -> bytes of its records in the file, this run
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._load(self.path)

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._places or episode_id in self._memory

    def __len__(self) -> int:
        return len(self._places) + len(self._memory)

    def check_room(self, client: str) -> None:
        """Refuse ``client`` a new episode once the records file is full, or its share is.

        The file is full at ``max_bytes``; a client's share is a quarter of it,
        counting the records written as that client since start-up.

        Raises:
            Unavailable: the file is full, or the client's share of it is (503
                naming ``--max-records-bytes``).
        """
        if self.path is None:
            return
        if self.size >= self.max_bytes:
            raise Unavailable(
                f"the records file {self.path} holds {self.size} bytes, past "
                f"--max-records-bytes {self.max_bytes}: the server takes no new episodes; "
                "move the file away (or raise the flag) and restart the server"
            )
        self.check_share(client)

    def check_share(self, client: str) -> None:
        """Refuse ``client`` once its records written since start-up hold a quarter of the file.

        Raises:
            Unavailable: the client's share is full (503 naming ``--max-records-bytes``).
        """
        written = self._written.get(client, 0)
        if self.path is not None and written >= self.file_share:
            raise Unavailable(
                f"client {client}'s records written since the server started hold {written} "
                f"bytes, its share (a quarter of --max-records-bytes {self.max_bytes}): it "
                "takes no new episodes of this client until the server restarts with the "
                "file moved away or the flag raised"
            )

    def append(self, entry: dict[str, Any], shares: Mapping[str, int] | None = None) -> None:
        """Keep a finished episode (``entry["id"]`` names it); on disk when this returns.

        Args:
            entry: the record.
            shares: the bytes of the text each client sent in the episode: the record's
                bytes in the file count against each client in proportion (the
                records it wrote since start-up, for :meth:`check_room`). None,
                or none sent: all against the client this runs as, which also
                owns the record in memory.
        """
        episode_id = str(entry["id"])
        if self.path is None:
            text = dumps(entry)
            with self._lock:
                self._forget(episode_id)
                client = current_client()
                self._memory[episode_id] = (client, text)
                self._mine.setdefault(client, {})[episode_id] = None
                self._count(client, len(text))
                while self._memory_size > self.memory_bytes:
                    victim = self._victim(client, episode_id)
                    if victim is None:
                        break
                    self._forget(victim)
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
            self.size = offset + len(line)
            for client, part in _split(len(line), shares or {}, current_client()).items():
                tally(self._written, client, part)

    def _victim(self, client: str, latest: str) -> str | None:
        """The record to drop: the oldest of a client past its share, else the oldest of all.

        The latest record is never dropped: a client past its share with no
        other record keeps it, over the budget, until the next record.
        """
        for owner in (client, *self._over):
            if owner in self._over:
                oldest = next(iter(self._mine[owner]))
                if oldest != latest:
                    return oldest
                if owner == client:
                    return None
        oldest = next(iter(self._memory))
        return oldest if oldest != latest else None

    def _forget(self, episode_id: str) -> None:
        kept = self._memory.pop(episode_id, None)
        if kept is not None:
            client, text = kept
            del self._mine[client][episode_id]
            if not self._mine[client]:
                del self._mine[client]
            self._count(client, -len(text))

    def _count(self, client: str, chars: int) -> None:
        self._memory_size += chars
        if tally(self._sizes, client, chars) > self.memory_share:
            self._over[client] = None
        else:
            self._over.pop(client, None)

    def get(self, episode_id: str) -> dict[str, Any] | None:
        """The finished episode ``episode_id``, or None."""
        if self.path is None:
            with self._lock:
                kept = self._memory.get(episode_id)
            return json.loads(kept[1]) if kept is not None else None
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
        self.size = offset
        if last and not last.endswith(b"\n"):
            with path.open("ab") as file:  # the next record must not continue the cut line
                file.write(b"\n")
                file.flush()
                os.fsync(file.fileno())
            self.size += 1


def _split(size: int, shares: Mapping[str, int], default: str) -> dict[str, int]:
    """``size`` split in proportion to ``shares`` (rounded up), or all ``default``'s.

    Example:
        >>> _split(10, {"a": 3, "b": 1}, "c"), _split(10, {}, "c")
        ({'a': 8, 'b': 3}, {'c': 10})
    """
    total = sum(shares.values())
    if total <= 0:
        return {default: size}
    return {client: -(-size * sent // total) for client, sent in shares.items() if sent > 0}


def _episode_id(line: bytes) -> str | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return str(entry["id"]) if isinstance(entry, dict) and "id" in entry else None


def utc_now() -> str:
    """The time now, as a record's ``started`` and ``finished`` show it (ISO 8601, UTC)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")
