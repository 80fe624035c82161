"""GSM8K grade-school math as :class:`~llm_envs.tasks.problems.MathProblem` records.

GSM8K (Cobbe et al., 2021) has 7,473 training and 1,319 test word problems. Each
record has a ``question`` and an ``answer`` field holding a worked solution that
ends with ``#### <final answer>``. A problem's :attr:`~MathProblem.answer` is the
text after ``####`` (thousands commas removed), its :attr:`~MathProblem.solution`
the text before it (calculator annotations like ``<<48/2=24>>`` kept as in the data).

Where the data comes from, in order: an explicit ``path`` (a JSON-lines file, or a
folder holding ``<split>.jsonl`` or ``gsm8k/<split>.jsonl``); the folder named by
``LLM_ENVS_DATA_DIR`` (``gsm8k/<split>.jsonl``, the file names of the
``openai/grade-school-math`` repository); the Hugging Face hub (``openai/gsm8k``,
config ``main``) through ``datasets``. Offline without a local file, the error says
what to set up.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from llm_envs.tasks.data_location import (
    convert_records,
    file_key,
    find_local_file,
    load_hub_records,
    read_numbered_records,
)
from llm_envs.tasks.math_answers import parse_number
from llm_envs.tasks.problems import MathProblem

__all__ = ["GSM8K_HUB", "Gsm8kSplit", "load_gsm8k", "problems_from_gsm8k_records"]

Gsm8kSplit = Literal["train", "test"]
"""A split of GSM8K."""

GSM8K_HUB = "openai/gsm8k"
"""The hub data set read when no local file is found (config ``main``)."""

_FILE_FIX = (
    "Fix: replace it with an intact {split}.jsonl (github.com/openai/grade-school-math, "
    "grade_school_math/data/{split}.jsonl), pass path=... to one, or move the file away to "
    "load openai/gsm8k from the Hugging Face hub"
)


def load_gsm8k(
    split: Gsm8kSplit = "test", path: str | os.PathLike[str] | None = None
) -> tuple[MathProblem, ...]:
    """Load a split of GSM8K, in the data's order, with ids ``"GSM8K/<split>/<i>"``.

    Args:
        split: ``"test"`` (1,319 problems) or ``"train"`` (7,473).
        path: a JSON-lines file, or a folder holding ``<split>.jsonl`` or
            ``gsm8k/<split>.jsonl``.

    Raises:
        ValueError: an unknown split; a file that is not valid JSON lines or holds
            no record; or a record without ``question``/``answer`` or without a
            ``####`` final answer (names the file, the line and the record).
        TaskDataNotFoundError: no source has the data; the message says what to set up.

    Example:
        >>> problem = load_gsm8k("test")[0]  # doctest: +SKIP
        >>> problem.answer  # doctest: +SKIP
        '18'
    """
    if split not in get_args(Gsm8kSplit):
        raise ValueError(f"split must be one of {get_args(Gsm8kSplit)}, got {split!r}")
    if path is not None and Path(path).expanduser().is_dir():
        direct = Path(path).expanduser() / f"{split}.jsonl"
        if direct.is_file():
            path = direct
    file, tried = find_local_file(f"gsm8k/{split}.jsonl", path, dataset="GSM8K")
    if file is not None:
        return _load_file(split, *file_key(file))
    return _load_hub(split, tuple(tried))


def problems_from_gsm8k_records(
    records: Iterable[Mapping[str, Any]], *, split: str = "test"
) -> tuple[MathProblem, ...]:
    r"""Convert GSM8K records (``question``, ``answer`` with ``#### final``), keeping order.

    Example:
        >>> record = {"question": "What is 2 + 2?", "answer": "2 + 2 = <<2+2=4>>4\n#### 4"}
        >>> problems_from_gsm8k_records([record])[0].answer
        '4'
    """
    return tuple(_problem(record, split, i) for i, record in enumerate(records))


def _problem(record: Mapping[str, Any], split: str, index: int) -> MathProblem:
    task_id = f"GSM8K/{split}/{index}"
    question, worked = record.get("question"), record.get("answer")
    if not isinstance(question, str) or not isinstance(worked, str):
        raise ValueError(f"record {task_id!r}: fields 'question' and 'answer' must be strings")
    solution, marker, final = worked.rpartition("####")
    final = final.strip()
    if not marker or not final:
        raise ValueError(f"record {task_id!r}: 'answer' has no '#### <final answer>' line")
    if parse_number(final) is not None:
        final = final.replace(",", "")  # "1,000" -> "1000": the canonical form
    return MathProblem(
        task_id=task_id, question=question.strip(), answer=final, solution=solution.strip()
    )


@functools.lru_cache(maxsize=8)
def _load_file(split: str, path: str, mtime_ns: int, size: int) -> tuple[MathProblem, ...]:
    # mtime_ns and size are part of the cache key only: an edited file is reparsed.
    file = Path(path)
    fix = _FILE_FIX.format(split=split)
    records = read_numbered_records(file, fix=fix)
    indexed = [(line, (index, record)) for index, (line, record) in enumerate(records)]
    return tuple(
        convert_records(file, indexed, lambda item: _problem(item[1], split, item[0]), fix=fix)
    )


@functools.lru_cache(maxsize=2)
def _load_hub(split: str, tried: tuple[str, ...]) -> tuple[MathProblem, ...]:
    splits = load_hub_records(
        GSM8K_HUB,
        "main",
        split=split,
        dataset="GSM8K",
        tried=tried,
        fix=f"pass path=... (a JSON-lines file), put gsm8k/{split}.jsonl in the folder named "
        "by LLM_ENVS_DATA_DIR, or go online with `pip install datasets`",
    )
    return problems_from_gsm8k_records(splits[split], split=split)
