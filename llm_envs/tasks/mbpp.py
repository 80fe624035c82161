"""MBPP (sanitized) as :class:`~llm_envs.tasks.problems.CodeProblem` records.

MBPP (Austin et al., 2021) poses a one-sentence task ("Write a function to find
the shared elements from the given two lists.") with a reference program and three
``assert`` tests. The hand-verified *sanitized* subset has 427 problems, split by
``task_id`` (see :data:`MBPP_SPLITS`).

How a record becomes a problem:

* ``tests`` = ``test_list`` (one ``assert`` each); ``test_setup`` = ``test_imports``.
* ``canonical_solution`` = ``code``, a whole program.
* ``entry_point`` = the function the tests call, found with :mod:`ast`: among the
  functions the reference program defines at top level, the one called by the most
  tests (ties: first called). It must be defined by the reference program.
* ``prompt`` = a function stub in the style of HumanEval (and of MultiPL-E's MBPP):
  the signature taken from the reference program, with the task as docstring::

      def similar_elements(test_tup1, test_tup2):
          \"\"\"Write a function to find the shared elements from the given two lists.\"\"\"

  so a model knows the name and the arguments, the tests stay hidden (the
  original MBPP prompt lists them), and ``prompt + canonical_solution`` is a
  valid program, as for HumanEval (the reference's ``def`` replaces the stub's).

The data's code is parsed, never executed.
"""

from __future__ import annotations

import ast
import functools
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from llm_envs.tasks.code_parsing import parse_quietly
from llm_envs.tasks.data_location import (
    convert_records,
    file_key,
    find_local_file,
    load_hub_records,
    read_numbered_records,
)
from llm_envs.tasks.problems import CodeProblem

__all__ = [
    "MBPP_FILE",
    "MBPP_HUB",
    "MBPP_SPLITS",
    "MbppSplit",
    "load_mbpp",
    "mbpp_prompt",
    "problems_from_mbpp_records",
]

MbppSplit = Literal["test", "train", "validation", "prompt", "all"]
"""A split of the sanitized MBPP data, or ``"all"`` for the 427 problems together."""

MBPP_SPLITS: dict[str, range] = {
    "prompt": range(1, 11),
    "test": range(11, 511),
    "validation": range(511, 601),
    "train": range(601, 975),
}
"""Task-id ranges of the splits (the sanitized subset keeps 7 / 257 / 43 / 120 of them)."""

MBPP_FILE = "sanitized-mbpp.json"
"""The file name in a data folder (as in google-research's ``mbpp/`` folder)."""

MBPP_HUB = "google-research-datasets/mbpp"
"""The hub data set read when no local file is found (the hub's current name for ``mbpp``)."""

_FILE_FIX = (
    "Fix: replace it with an intact sanitized-mbpp.json (github.com/google-research/"
    "google-research, mbpp/sanitized-mbpp.json), pass path=... to one, or move the file away "
    "to load google-research-datasets/mbpp from the Hugging Face hub"
)


def load_mbpp(
    split: MbppSplit = "test", path: str | os.PathLike[str] | None = None
) -> tuple[CodeProblem, ...]:
    """Load a split of sanitized MBPP, ordered by task number.

    The data comes from, in order: ``path`` (the JSON file, or a folder holding
    ``sanitized-mbpp.json``); the folder named by ``LLM_ENVS_DATA_DIR``; the Hugging
    Face hub (``mbpp``, now named ``google-research-datasets/mbpp``, config
    ``sanitized``, every split, through ``datasets``).

    Args:
        split: ``"test"`` (257 problems), ``"train"`` (120), ``"validation"`` (43),
            ``"prompt"`` (7, the few-shot examples) or ``"all"`` (427).
        path: an explicit data file or folder.

    Raises:
        ValueError: an unknown split; a file that is not valid JSON, holds no
            record or a malformed one (names the file, the line and the task);
            or no problem in ``split``.
        TaskDataNotFoundError: no source has the data; the message says what to set up.

    Example:
        >>> problem = load_mbpp("test")[0]  # doctest: +SKIP
        >>> problem.task_id, problem.entry_point  # doctest: +SKIP
        ('Mbpp/11', 'remove_Occ')
    """
    if split not in get_args(MbppSplit):
        raise ValueError(f"split must be one of {get_args(MbppSplit)}, got {split!r}")
    file, tried = find_local_file(MBPP_FILE, path, dataset="MBPP")
    problems = _load_file(*file_key(file)) if file is not None else _load_hub(tuple(tried))
    if split == "all":
        return problems
    ids = MBPP_SPLITS[split]
    selected = tuple(p for p in problems if _task_number(p.task_id) in ids)
    if not selected:
        raise ValueError(
            f"{file if file is not None else MBPP_HUB}: none of its {len(problems)} MBPP "
            f"problems is in split {split!r} (task ids {ids.start} to {ids.stop - 1}); pass "
            "split='all', or a file that holds the split"
        )
    return selected


def problems_from_mbpp_records(records: Iterable[Mapping[str, Any]]) -> tuple[CodeProblem, ...]:
    """Convert sanitized-MBPP records to problems, sorted by task number.

    Records have the fields of ``sanitized-mbpp.json`` and of the hub's ``sanitized``
    config: ``task_id`` (int), ``prompt``, ``code``, ``test_imports``, ``test_list``.

    Raises:
        ValueError: a field is missing or malformed, or no function that the tests
            call is defined by the reference code (names the task).
    """
    problems = [_problem(record) for record in records]
    return tuple(sorted(problems, key=lambda p: _task_number(p.task_id)))


def mbpp_prompt(description: str, signature: str) -> str:
    """Pose an MBPP task as a function stub: the signature, then the task as docstring.

    Example:
        >>> print(mbpp_prompt("Write a function to add two numbers.", "def add(a, b):"), end="")
        def add(a, b):
            \"\"\"Write a function to add two numbers.\"\"\"
    """
    lines = description.strip().splitlines() or [""]
    # Escape what would end or corrupt the literal; MBPP has none, user data may.
    lines = [line.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') for line in lines]
    if lines[-1].endswith('"'):
        lines[-1] = lines[-1][:-1] + '\\"'
    body = "\n    ".join(line.rstrip() for line in lines)
    return f'{signature}\n    """{body}"""\n'


def _problem(record: Mapping[str, Any]) -> CodeProblem:
    raw_id = record.get("task_id")
    task_id = f"Mbpp/{raw_id}"
    if not isinstance(raw_id, int) and not (isinstance(raw_id, str) and raw_id.isdigit()):
        raise ValueError(f"MBPP record {raw_id!r}: field 'task_id' must be an integer")
    for name in ("prompt", "code"):
        if not isinstance(record.get(name), str):
            raise ValueError(f"task {task_id!r}: field {name!r} must be a string")
    tests = record.get("test_list")
    imports = record.get("test_imports") or []
    if not _is_str_list(tests) or not tests:
        raise ValueError(f"task {task_id!r}: field 'test_list' must be a non-empty list of str")
    if not _is_str_list(imports):
        raise ValueError(f"task {task_id!r}: field 'test_imports' must be a list of str")
    code: str = record["code"]
    entry = _entry_point(code, tests, task_id)
    return CodeProblem(
        task_id=task_id,
        prompt=mbpp_prompt(record["prompt"], _signature(entry)),
        entry_point=entry.name,
        tests=tuple(test.strip() for test in tests),
        test_setup="".join(f"{line.strip()}\n" for line in imports),
        canonical_solution=code,
    )


def _entry_point(code: str, tests: list[str], task_id: str) -> ast.FunctionDef:
    try:
        module = parse_quietly(code)
    except SyntaxError as exc:
        raise ValueError(f"task {task_id!r}: reference code does not parse: {exc}") from exc
    defined = {
        node.name: node
        for node in module.body
        if isinstance(node, ast.FunctionDef)  # MBPP has no async or class entry points
    }
    calls: Counter[str] = Counter()
    first_call: dict[str, int] = {}
    for test in tests:
        try:
            tree = parse_quietly(test)
        except SyntaxError as exc:
            raise ValueError(f"task {task_id!r}: test {test!r} does not parse: {exc}") from exc
        called = [
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        ]
        for name in dict.fromkeys(called):  # count each test once per name
            if name in defined:
                calls[name] += 1
                first_call.setdefault(name, len(first_call))
    if not calls:
        raise ValueError(
            f"task {task_id!r}: the tests call no function that the reference code defines "
            f"(it defines {sorted(defined)})"
        )
    name = max(calls, key=lambda n: (calls[n], -first_call[n]))
    return defined[name]


def _signature(function: ast.FunctionDef) -> str:
    returns = f" -> {ast.unparse(function.returns)}" if function.returns else ""
    return f"def {function.name}({ast.unparse(function.args)}){returns}:"


def _is_str_list(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


def _task_number(task_id: str) -> int:
    return int(task_id.rpartition("/")[2])


@functools.lru_cache(maxsize=8)
def _load_file(path: str, mtime_ns: int, size: int) -> tuple[CodeProblem, ...]:
    # mtime_ns and size are part of the cache key only: an edited file is reparsed.
    file = Path(path)
    problems = convert_records(
        file, read_numbered_records(file, fix=_FILE_FIX), _problem, fix=_FILE_FIX
    )
    return tuple(sorted(problems, key=lambda p: _task_number(p.task_id)))


@functools.lru_cache(maxsize=1)
def _load_hub(tried: tuple[str, ...]) -> tuple[CodeProblem, ...]:
    splits = load_hub_records(
        MBPP_HUB,
        "sanitized",
        dataset="MBPP",
        tried=tried,
        fix=f"pass path=..., set LLM_ENVS_DATA_DIR to a folder holding {MBPP_FILE}, "
        "or go online with `pip install datasets`",
    )
    return problems_from_mbpp_records(record for records in splits.values() for record in records)
