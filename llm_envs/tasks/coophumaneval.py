"""CoopHumanEval as :class:`~llm_envs.tasks.problems.CodeProblem` records.

CoopHumanEval (82 problems, from the LLM_Collab_Code_Generation project behind the
``CoMLRL/CoopHumanEval`` hub data set) poses HumanEval-style problems meant to be
solved by two agents: a helper writing ``aux`` and a main agent writing the entry
point. Its records have HumanEval's shape (``task_id, prompt, entry_point, test``,
a ``check(candidate)`` function) but no reference solutions, so
:attr:`~CodeProblem.canonical_solution` is ``None``. The tests are split exactly as
HumanEval's (:func:`llm_envs.tasks.humaneval.split_check`), and the setup opens
with the prompt's :func:`~llm_envs.tasks.humaneval.trusted_helpers` in the same
way, so that the tests never call a program's copy of a helper the prompt defines.

Known quirk, kept as in the data (``tests/tasks`` pins it): CoopHumanEval/2 describes
dates as ``mm-dd-yyyy`` while its tests expect ``dd-mm-yyyy``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from typing import Any

from llm_envs.tasks.data_location import (
    file_key,
    find_local_file,
    load_hub_records,
)
from llm_envs.tasks.humaneval import check_record_to_problem, load_check_file, task_sort_key
from llm_envs.tasks.problems import CodeProblem

__all__ = [
    "COOPHUMANEVAL_FILE",
    "COOPHUMANEVAL_HUB",
    "load_coophumaneval",
    "problems_from_coophumaneval_records",
]

COOPHUMANEVAL_FILE = "CoopHumanEval.json"
"""The file name in a data folder."""

COOPHUMANEVAL_HUB = "CoMLRL/CoopHumanEval"
"""The Hugging Face hub data set read when no local file is found."""

_FILE_FIX = (
    "Fix: replace it with an intact CoopHumanEval.json (data/che_raw.json of the "
    "LLM_Collab_Code_Generation project), pass path=... to one, or move the file away to "
    "load CoMLRL/CoopHumanEval from the Hugging Face hub"
)


def load_coophumaneval(path: str | os.PathLike[str] | None = None) -> tuple[CodeProblem, ...]:
    """Load the 82 CoopHumanEval problems, ordered by task number.

    The data comes from, in order: ``path`` (the JSON file, or a folder holding
    ``CoopHumanEval.json``); the folder named by ``LLM_ENVS_DATA_DIR``; the
    Hugging Face hub (``CoMLRL/CoopHumanEval``, every split, through ``datasets``).

    Raises:
        TaskDataNotFoundError: no source has the data; the message says what to set up.
        ValueError: the file is not valid JSON, holds no record, or a record is
            malformed (names the file, the line, the task and the field).
    """
    file, tried = find_local_file(COOPHUMANEVAL_FILE, path, dataset="CoopHumanEval")
    if file is not None:
        return _load_file(*file_key(file))
    return _load_hub(tuple(tried))


def problems_from_coophumaneval_records(
    records: Iterable[Mapping[str, Any]],
) -> tuple[CodeProblem, ...]:
    """Convert CoopHumanEval records (``task_id, prompt, entry_point, test``), sorted by task."""
    problems = [check_record_to_problem(record, with_solution=False) for record in records]
    return tuple(sorted(problems, key=lambda p: task_sort_key(p.task_id)))


def _load_file(path: str, mtime_ns: int, size: int) -> tuple[CodeProblem, ...]:
    return load_check_file(path, mtime_ns, size, with_solution=False, fix=_FILE_FIX)


@functools.lru_cache(maxsize=1)
def _load_hub(tried: tuple[str, ...]) -> tuple[CodeProblem, ...]:
    splits = load_hub_records(
        COOPHUMANEVAL_HUB,
        None,
        dataset="CoopHumanEval",
        tried=tried,
        fix=f"pass path=..., set LLM_ENVS_DATA_DIR to a folder holding {COOPHUMANEVAL_FILE}, "
        "or go online with `pip install datasets`",
    )
    return problems_from_coophumaneval_records(
        record for records in splits.values() for record in records
    )
