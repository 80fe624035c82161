"""CI runs the README's test command: its installs in CI's install phase, then its pytest.

``.ci/run`` installs once (the README's test command installs packages, then
runs pytest): each install of the README's command must be one of the install
phase's, with the same flags and at least its extras, and the test phase must
run the command's pytest as it stands.
"""

from __future__ import annotations

import re
import shlex
import types
from pathlib import Path

import pytest

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


# --- the order of work under pytest -n (tests/conftest.py) -----------------------------------


def test_the_scheduling_names_are_files_of_the_tree():
    from tests.conftest import SLOWEST_FIRST, VLLM_SERVER_FILES

    for name in [*VLLM_SERVER_FILES, *(u for u in SLOWEST_FIRST if u != "vllm")]:
        assert (ROOT / name).is_file(), f"{name} is gone: update tests/conftest.py"


def test_every_file_that_uses_the_vllm_server_is_in_its_group():
    from tests.conftest import VLLM_SERVER_FILES

    users = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"def \w+\([^)]*\bvllm_server\b", path.read_text(encoding="utf-8"))
    }
    assert users == VLLM_SERVER_FILES


class Worker:
    """What a scheduler needs of an xdist worker: the indexes it was sent."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.shutting_down = False
        self.gateway = types.SimpleNamespace(id=f"gw{id(self)}")

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_two_workers_start_on_the_two_longest_files_and_keep_a_file_whole():
    xdist_scheduler = pytest.importorskip("xdist.scheduler")
    from tests import conftest

    nodeids = [
        "tests/a.py::test_1",
        "tests/a.py::test_2",
        "tests/baselines/grpo/test_learning.py::test_smollm2_reward_rises_on_short_sums",
        "tests/baselines/samplers/test_build.py::test_x",
        "tests/b.py::test_1",
        "tests/baselines/eval/test_models.py::test_y",
        "tests/baselines/is_trainer/test_debate_learning.py::test_smollm2_learns",
    ]
    items = [types.SimpleNamespace(nodeid=n) for n in nodeids]
    conftest.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    collection = [item.nodeid for item in items]
    assert collection[:2] == [nodeids[6], nodeids[2]]  # the debate, then GRPO's learning test

    values = {"dist": "load", "tx": ["popen", "popen"]}
    config = types.SimpleNamespace(
        getvalue=values.__getitem__, option=types.SimpleNamespace(loadscopereorder=True)
    )
    scheduler = conftest.UnitScheduling().pytest_xdist_make_scheduler(config, None)  # type: ignore[arg-type]
    assert isinstance(scheduler, xdist_scheduler.LoadScopeScheduling)
    workers = [Worker(), Worker()]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    first, second = ([collection[i] for i in w.sent] for w in workers)
    assert first[0] == nodeids[6] and second[0] == nodeids[2]
    # the vLLM group (one server) and each file go to one worker whole
    ran = first + second
    while not all(w.shutting_down for w in workers):
        for worker in workers:
            for index in list(worker.sent):
                worker.sent.remove(index)
                scheduler.mark_test_complete(worker, index)
            ran += [collection[i] for i in worker.sent]
    owners = {n: [n in first, n in second] for n in nodeids}
    assert owners[nodeids[3]] == owners[nodeids[5]]
    assert owners[nodeids[0]] == owners[nodeids[1]]
    assert sorted(set(ran)) == sorted(nodeids)


def test_the_scheduling_plugin_is_registered_where_xdist_is(pytestconfig):
    plugins = pytestconfig.pluginmanager
    assert plugins.hasplugin("llm_envs_unit_scheduling") == plugins.hasplugin("xdist")
    pytest.importorskip("xdist")
    assert plugins.hasplugin("llm_envs_unit_scheduling")
