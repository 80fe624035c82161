"""``llm-envs new-env NAME [DIR]``: the package it writes passes its own tests, installs and trains.

The fast tests render the templates into a temporary folder and run the new
package's own tests in a fresh interpreter, with the folder on ``PYTHONPATH``.
The slow one is what a user does: a virtual environment (``--system-site-packages``,
so this checkout's llm-envs and torch are there), ``pip install -e`` of the new
package (offline: ``--no-deps --no-build-isolation``), then the IS trainer, the
evaluator and the report on the family by its name alone, from a temporary
folder: nothing of this repository is named or written.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import shlex
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
# Offline: the package needs nothing beyond what this environment has.
INSTALL = "-m pip install -q --no-deps --no-build-isolation --no-index -e"
# The smallest settings that train: one game of one round (two turns), four tokens a turn.
TRAIN = (
    "-m baselines.is_trainer --env guessnum --model tiny --env-kwargs '{\"max_rounds\": 1}' "
    "--num-iterations 1 --groups-per-batch 1 --max-tokens 4 --sampler transformers "
    "--device cpu --eval-every 0 --no-progress --output-dir run"
)
# The reference player in both seats: no model to load.
EVALUATE = (
    "-m baselines.commands eval --env guessnum --models reference --problems 2 "
    "--num-bootstrap 20 --no-progress --output-dir eval"
)


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
        env=_environ(PYTHONPATH=str(package)),
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
    assert "pip install -e . && pytest" in out and "--env guessnum" in out
    with pytest.raises(SystemExit) as refused:
        commands.main(["new-env", "Bad-Name", "elsewhere"])
    assert refused.value.code == 2
    assert "NAME must be a lowercase Python identifier" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.slow
@pytest.mark.training
def test_installed_with_pip_it_trains_is_evaluated_and_reported_by_name(tmp_path):
    package = new_env("guessnum", tmp_path / "guessnum")
    venv = tmp_path / "venv"
    # No pip of its own: the system's (seen through --system-site-packages) installs into it,
    # and builds with the system's setuptools (a venv's bundled one may lack bdist_wheel).
    made = _run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        cwd=tmp_path,
        env=_environ(),
    )
    assert made.returncode == 0, made.stderr
    python = str(venv / "bin" / "python")
    installed = _run(
        [python, *shlex.split(INSTALL), str(package)],
        cwd=tmp_path,
        env=_environ(),
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    work = tmp_path / "work"  # the user's folder: nothing of this repository on any path
    work.mkdir()
    env = _environ()
    trained = _run(
        [python, *shlex.split(TRAIN)],
        cwd=work,
        env=env,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    (metrics,) = [json.loads(line) for line in (work / "run" / "metrics.jsonl").open()]
    assert metrics["optim/num_steps"] == 1.0 and math.isfinite(metrics["optim/loss"])
    assert {"env/all/win", "env/all/draw", "env/all/loss"} <= set(metrics)  # the family's infos
    assert json.loads((work / "run" / "config.json").read_text())["env"] == "guessnum"

    evaluated = _run(
        [python, *shlex.split(EVALUATE)],
        cwd=work,
        env=env,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    # Bisection in both seats: someone finds the number within 7 guesses, every time.
    summary = json.loads((work / "eval" / "summary.json").read_text())
    assert "guessnum" in json.dumps(summary)
    reported = _run(
        [python, "-m", "baselines.commands", "report", "run"], cwd=work, env=env, timeout=120
    )
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert (work / "run" / "report" / "index.html").exists()
    assert not list(package.glob("*.egg-info"))  # the install wrote nothing into the package
