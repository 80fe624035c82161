"""The test tiers hold: a test that loads a model and is not marked ``slow`` fails.

``tests/conftest.py`` fails such a test before its fixtures run (so ``pytest -m
"not slow"`` never loads a model, and CI reports the missing marker). This test
runs that conftest on a small suite of its own, in a subprocess.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

SUITE = """
import pytest


@pytest.fixture
def tiny_model_dir():
    return "a model"


@pytest.fixture
def tokenizer(tiny_model_dir):
    return tiny_model_dir


def test_unmarked(tiny_model_dir):
    pass


def test_unmarked_through_another_fixture(tokenizer):
    pass


@pytest.mark.training
def test_training_but_not_slow():
    pass


@pytest.mark.slow
def test_marked(tiny_model_dir):
    pass


@pytest.mark.slow
@pytest.mark.training
def test_marked_training(tokenizer):
    pass


def test_no_model():
    pass
"""


def test_a_test_that_loads_a_model_without_the_slow_marker_fails(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_tiers.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow\n    training\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = re.findall(r"^(PASSED|FAILED|ERROR) test_tiers\.py::(\w+)", done.stdout, re.M)
    outcomes = {name: outcome for outcome, name in summary}
    assert outcomes == {
        "test_unmarked": "ERROR",
        "test_unmarked_through_another_fixture": "ERROR",
        "test_training_but_not_slow": "ERROR",
        "test_marked": "PASSED",
        "test_marked_training": "PASSED",
        "test_no_model": "PASSED",
    }, done.stdout
    assert "uses tiny_model_dir, which loads a model: mark it @pytest.mark.slow" in done.stdout
    assert "is marked training but not slow" in done.stdout
