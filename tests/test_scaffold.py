"""``llm-envs new-env NAME [DIR]``: the package it writes passes its own tests, installs and trains.

These render the templates into a temporary folder and run the new package's
own tests in a fresh interpreter, with the folder on ``PYTHONPATH``. What a
user does next (install it with pip, then every command by its name) is
``tests/test_own_package.py``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from baselines import commands
from llm_envs.scaffold import new_env, template_files
from llm_envs.scaffold.new_env import MAX_NAME_LENGTH, check_name

ROOT = Path(__file__).resolve().parents[1]


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 300):
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _environ(**extra: str) -> dict[str, str]:
    """This process's environment without its PYTHONPATH, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


def test_the_new_package_passes_its_own_tests(tmp_path):
    package = new_env("guessnum", tmp_path / "guessnum")
    assert sorted(str(p.relative_to(package)) for p in package.rglob("*") if p.is_file()) == [
        "README.md",
        "guessnum/__init__.py",
        "guessnum/config.py",
        "guessnum/env.py",
        "guessnum/family.py",
        "guessnum/players.py",
        "guessnum/rules.py",
        "pyproject.toml",
        "tests/test_guessnum.py",
    ]
    ran = _run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=package,
        env=_environ(PYTHONPATH=os.pathsep.join([str(package), str(ROOT)])),  # this llm-envs
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert " passed" in ran.stdout and "failed" not in ran.stdout


def test_the_new_package_declares_its_entry_point(tmp_path):
    package = new_env("guess_num", tmp_path / "pkg")
    project = tomllib.loads((package / "pyproject.toml").read_text())
    assert project["project"]["name"] == "guess-num"
    assert project["project"]["entry-points"]["llm_envs.families"] == {
        "guess_num": "guess_num:register"
    }
    text = "\n".join(p.read_text() for p in package.rglob("*") if p.is_file())
    assert "GuessNumFamily" in text and "guess_num/GuessNum-v0" in text
    assert "$" not in text  # every placeholder filled, no stray template syntax


def test_the_new_package_is_lint_clean(tmp_path):
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (the dev extra)")
    package = new_env("guessnum", tmp_path / "guessnum")
    # The project's rules (docstrings, imports, line length), with the new package first-party.
    config = tmp_path / "ruff.toml"
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    config.write_text(
        "line-length = 100\ntarget-version = 'py311'\n[lint]\n"
        f"select = {json.dumps(lint['select'])}\nignore = {json.dumps(lint['ignore'])}\n"
        "[lint.pydocstyle]\nconvention = 'google'\n[lint.per-file-ignores]\n"
        f"'tests/**' = {json.dumps(lint['per-file-ignores']['tests/**'])}\n"
    )
    for argv in ([ruff, "check"], [ruff, "format", "--check"]):
        ran = _run([*argv, "--config", str(config), "."], cwd=package, env=_environ())
        assert ran.returncode == 0, ran.stdout + ran.stderr


def test_the_templates_ship_in_the_wheel():
    # They are files, not modules: only pyproject's package-data puts them in a wheel.
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["llm_envs.scaffold"]
    templates = [f"templates/{path}" for path in template_files()]
    assert len(templates) == 9
    assert [t for t in templates if not any(fnmatch.fnmatch(t, p) for p in patterns)] == []
    on_disk = ROOT / "llm_envs" / "scaffold" / "templates"
    assert sorted(templates) == sorted(
        f"templates/{p.relative_to(on_disk)}" for p in on_disk.rglob("*") if p.is_file()
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Guess-Num", "NAME must be a lowercase Python identifier .*'Guess-Num'.* 'guess_num'"),
        ("1st", "got '1st'.*e.g. 'env_1st'"),
        ("", "got ''"),
        ("class", "NAME 'class' is a Python keyword"),
        ("json", "NAME 'json' is a module Python imports already \\(the standard library\\)"),
        ("numpy", "NAME 'numpy' is a module Python imports already \\(.*numpy"),
        ("debate", "NAME 'debate' is a registered family already"),
        ("g" * (MAX_NAME_LENGTH + 1), f"NAME may be {MAX_NAME_LENGTH} characters at most"),
    ],
)
def test_a_bad_name_is_refused_with_the_fix(tmp_path, name, message):
    with pytest.raises(ValueError, match=message):
        new_env(name, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_longest_name_is_taken():
    assert check_name("g" * MAX_NAME_LENGTH) == "g" * MAX_NAME_LENGTH


def test_a_folder_with_anything_in_it_is_never_written_to(tmp_path):
    (tmp_path / "mine.txt").write_text("my notes")
    with pytest.raises(ValueError, match="a folder that is not empty; new-env writes only"):
        new_env("guessnum", tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
    with pytest.raises(ValueError, match="is a file"):
        new_env("guessnum", tmp_path / "mine.txt")
    assert (tmp_path / "mine.txt").read_text() == "my notes"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (new_env("guessnum", empty) / "pyproject.toml").exists()


def test_llm_envs_new_env_writes_the_package_and_says_what_next(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert commands.main(["new-env", "guessnum"]) == 0
    assert (tmp_path / "guessnum" / "guessnum" / "family.py").exists()  # DIR defaults to ./NAME
    out = capsys.readouterr().out
    assert "pip install -e '.[test]' && pytest" in out and "llm-envs check guessnum" in out
    assert "--env guessnum" in out
    with pytest.raises(SystemExit) as refused:
        commands.main(["new-env", "Bad-Name", "elsewhere"])
    assert refused.value.code == 2
    assert "NAME must be a lowercase Python identifier" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere").exists()
