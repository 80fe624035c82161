"""A broken data file is an error naming the file, the line (JSON) and where a good copy is.

Every case builds its file in ``tmp_path`` and points ``LLM_ENVS_DATA_DIR`` (or
the loader's ``path``) at it; nothing here needs the network or the shared data.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_envs.tasks import (
    DATA_DIR_ENV,
    load_coophumaneval,
    load_gsm8k,
    load_humaneval,
    load_mbpp,
)
from llm_envs.tasks.data_location import read_records

CHECK = "def check(candidate):\n    assert candidate(1) == 1\n"
HUMANEVAL = {
    "task_id": "HumanEval/0",
    "prompt": "def f(x):\n",
    "entry_point": "f",
    "canonical_solution": "    return x\n",
    "test": CHECK,
}
COOP = {"task_id": "CoopHumanEval/0", "prompt": "def f(x):\n", "entry_point": "f", "test": CHECK}


def mbpp(task_id: int, **fields: object) -> dict[str, object]:
    record = {
        "task_id": task_id,
        "prompt": "Write a function to return one.",
        "code": "def one():\n    return 1",
        "test_imports": [],
        "test_list": ["assert one() == 1"],
    }
    return {**record, **fields}


def gsm8k(answer: str = "2 + 2 = 4\n#### 4") -> dict[str, object]:
    return {"question": "What is 2 + 2?", "answer": answer}


def json_list(*records: object) -> str:
    # One record per line, as in the real files, so that lines are easy to count.
    return "[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n"


def json_lines(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def load_from_data_dir(loader: Callable[[], object]) -> Callable[[Path], object]:
    def load(folder: Path) -> object:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(DATA_DIR_ENV, str(folder))
            return loader()

    return load


HUMANEVAL_GZ = "HumanEval.jsonl.gz"
MBPP_FILE = "sanitized-mbpp.json"
COOP_FILE = "CoopHumanEval.json"
GSM8K_FILE = "gsm8k/test.jsonl"

# (file name, content, how to load, the message up to the fix: `{file}` is the file's path)
CASES: list[tuple[str, str | bytes, Callable[[Path], object], str]] = [
    (
        HUMANEVAL_GZ,
        b"not gzip at all",
        load_from_data_dir(load_humaneval),
        "{file}: not a valid gzip file (Not a gzipped file (b'no'))",
    ),
    (
        HUMANEVAL_GZ,
        gzip.compress(json_lines(HUMANEVAL).encode(), mtime=0)[:-12],
        load_from_data_dir(load_humaneval),
        "{file}: not a valid gzip file (Compressed file ended before the end-of-stream",
    ),
    (
        HUMANEVAL_GZ,
        gzip.compress(b"", mtime=0),
        load_from_data_dir(load_humaneval),
        "{file}: is empty",
    ),
    (
        "HumanEval.jsonl",
        json_lines(HUMANEVAL, HUMANEVAL)[:-20],
        lambda folder: load_humaneval(folder / "HumanEval.jsonl"),
        "{file}:2: invalid JSON (Unterminated string starting at, column 121); the last line "
        "is cut short: the file is truncated",
    ),
    (
        MBPP_FILE,
        json_list(mbpp(11), mbpp(12))[:-30],
        lambda folder: load_mbpp(path=folder),
        "{file}:3: invalid JSON (Unterminated string starting at, column 118); the file ends "
        "mid-record: it is truncated",
    ),
    (
        MBPP_FILE,
        json_list(mbpp(11), mbpp(12)).replace('"task_id": 12,', '"task_id": 12,,'),
        load_from_data_dir(lambda: load_mbpp("test")),
        "{file}:3: invalid JSON (Expecting property name enclosed in double quotes, column 16)",
    ),
    (MBPP_FILE, "", load_from_data_dir(load_mbpp), "{file}: is empty"),
    (MBPP_FILE, "[]\n", load_from_data_dir(load_mbpp), "{file}: holds no records (an empty JSON"),
    (
        MBPP_FILE,
        json_list(mbpp(11), 12),
        load_from_data_dir(load_mbpp),
        "{file}:3: expected a JSON object per record, got a JSON number",
    ),
    (
        MBPP_FILE,
        json_list(mbpp(11), mbpp(12), mbpp(13, code=None)),
        load_from_data_dir(load_mbpp),
        "{file}:4: malformed record: task 'Mbpp/13': field 'code' must be a string",
    ),
    (
        MBPP_FILE,
        json_list(mbpp(11)) + "[]",
        load_from_data_dir(load_mbpp),
        "{file}:4: unexpected text after the JSON list",
    ),
    (
        MBPP_FILE,
        json_list(mbpp(11))[:-3],
        load_from_data_dir(load_mbpp),
        "{file}:2: the JSON list ends without its closing ']': the file is truncated",
    ),
    (
        COOP_FILE,
        json_list(COOP).encode().replace(b"def f", b"def \xff", 1),
        load_from_data_dir(load_coophumaneval),
        "{file}:2: not UTF-8 text (invalid start byte)",
    ),
    (
        COOP_FILE,
        json_list(COOP, {**COOP, "task_id": "CoopHumanEval/1", "test": "assert 1\n"}),
        lambda folder: load_coophumaneval(folder / COOP_FILE),
        "{file}:3: malformed record: task 'CoopHumanEval/1': test code must define exactly one",
    ),
    (
        GSM8K_FILE,
        json_lines(gsm8k()) + "{oops\n" + json_lines(gsm8k()),
        load_from_data_dir(load_gsm8k),
        "{file}:2: invalid JSON (Expecting property name enclosed in double quotes, column 2)",
    ),
    (
        GSM8K_FILE,
        json_lines(gsm8k(), gsm8k(), gsm8k("no final answer")),
        load_from_data_dir(load_gsm8k),
        "{file}:3: malformed record: record 'GSM8K/test/2': 'answer' has no '#### <final "
        "answer>' line",
    ),
]


IDS = [
    "corrupt gzip",
    "cut gzip",
    "empty gzip",
    "truncated json lines",
    "truncated json list",
    "invalid json",
    "empty file",
    "empty list",
    "not an object",
    "missing field",
    "text after the list",
    "unclosed list",
    "not utf-8",
    "malformed check",
    "invalid json line",
    "no final answer",
]


@pytest.mark.parametrize(("name", "content", "load", "message"), CASES, ids=IDS)
def test_a_broken_file_names_itself_its_line_and_the_fix(tmp_path, name, content, load, message):
    assert len(IDS) == len(CASES)
    file = tmp_path / name
    file.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        file.write_text(content, encoding="utf-8")
    else:
        file.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(str(tmp_path))) as caught:
        load(tmp_path)
    text = str(caught.value)
    expected = message.format(file=file)
    assert text.startswith(expected), f"\n{text}\n{expected}"
    assert ". Fix: replace it with an intact " in text
    assert re.search(r"pass path=\.\.\. to one", text)


def test_an_mbpp_file_without_the_split_is_an_error_not_zero_problems(tmp_path):
    (tmp_path / MBPP_FILE).write_text(json_list(mbpp(700)))  # a train task only
    assert [p.task_id for p in load_mbpp("train", path=tmp_path)] == ["Mbpp/700"]
    with pytest.raises(ValueError, match=r"none of its 1 MBPP problems is in split 'test'"):
        load_mbpp("test", path=tmp_path)


def test_json_lines_are_split_at_newlines_only(tmp_path):
    # U+2028 is legal inside a JSON string; str.splitlines would cut the record there.
    file = tmp_path / "test.jsonl"
    file.write_text(json.dumps(gsm8k(), ensure_ascii=False).replace("2 + 2", "2\u2028+ 2") + "\n")
    assert load_gsm8k(path=file)[0].question == "What is 2\u2028+ 2?"


def test_read_records_gives_plain_records_of_either_format(tmp_path):
    listed, lined = tmp_path / "a.json", tmp_path / "b.jsonl"
    listed.write_text(json_list({"a": 1}, {"a": 2}))
    lined.write_text(json_lines({"a": 1}, {"a": 2}))
    assert read_records(listed) == read_records(lined) == [{"a": 1}, {"a": 2}]
