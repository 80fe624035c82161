"""CI runs the README's test command: its installs in CI's install phase, then its pytest.

``.ci/run`` installs once (the README's test command installs packages, then
runs pytest): each install of the README's command must be one of the install
phase's, with the same flags and at least its extras, and the test phase must
run the command's pytest as it stands.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command() -> list[list[str]]:
    """The README's test command, split at ``&&`` into argument lists."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Run the tests") :]
    line = next(line for line in section.splitlines() if "pytest" in line)
    return [shlex.split(part) for part in line.split("&&")]


def ci_installs() -> list[list[str]]:
    """The ``pip install`` argument lists of ``.ci/run``'s install phase."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    phase = text[text.index('echo "== install"') : text.index('echo "== tests')]
    return [shlex.split(m) for m in re.findall(r"^\s*python -m (pip install .*)$", phase, re.M)]


def extras(argument: str) -> tuple[str, set[str]]:
    """``(".", {"train", "test"})`` for ``.[train,test]``; no extras for a plain name."""
    name, _, rest = argument.partition("[")
    return name, set(filter(None, rest.rstrip("]").split(",")))


def covered(install: list[str], by: list[str]) -> bool:
    """Whether the install ``by`` installs all that ``install`` does, with the same flags."""
    flags = {a for a in install if a.startswith("-") and a != "-q"}
    if not flags <= set(by):
        return False
    wanted = [extras(a) for a in install[2:] if not a.startswith("-")]
    given = dict(extras(a) for a in by[2:] if not a.startswith("-"))
    return all(name in given and more <= given[name] for name, more in wanted)


def test_the_readme_command_installs_then_runs_pytest_on_two_workers():
    *installs, run = readme_test_command()
    assert installs and all(c[:2] == ["pip", "install"] for c in installs), installs
    assert run == ["python", "-m", "pytest", "-n", "2"]


def test_each_readme_install_is_in_the_ci_install_phase():
    *installs, _ = readme_test_command()
    for install in installs:
        assert any(covered(install, by) for by in ci_installs()), (install, ci_installs())


def test_ci_runs_the_readme_pytest_as_it_stands():
    *_, run = readme_test_command()
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(rf"^time {re.escape(shlex.join(run))} \|\|", text, re.M)


def test_covered_reads_flags_and_extras():
    assert covered(["pip", "install", "-e", ".[train]"], ["pip", "install", "-e", ".[a,train]"])
    assert not covered(["pip", "install", "-e", ".[train,x]"], ["pip", "install", "-e", ".[train]"])
    assert not covered(["pip", "install", "--no-deps", "o==1"], ["pip", "install", "o==1"])
    assert not covered(["pip", "install", "torch==2.1"], ["pip", "install", "torch==2.13.0"])
