"""docs/architecture.md against the tree: its folder map, and its trainer example runs.

The map names every package folder of `llm_envs` and `baselines` (at any
depth) and every module at their top level, and everything it names exists
and has a docstring, so the map cannot fall behind a move. The "Adding a
trainer" example is a whole trainer: it trains, checkpoints and resumes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGES = ("llm_envs", "baselines")
# An entry: its indentation, then one name or several separated by commas
# ("cli.py, config.py"), then the description.
ENTRY = re.compile(r"^(?P<indent> *)(?P<names>[\w.]+/?(?:, [\w.]+/?)*)(?: {2,}|$)")


def section(title: str) -> str:
    text = PAGE.read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def map_entries(block: str) -> set[str]:
    """The paths the folder map names, as ``llm_envs/serve/`` or ``baselines/cli.py``."""
    named: set[str] = set()
    parents: list[tuple[int, str]] = []  # (indentation, folder) of the enclosing entries
    for line in block.splitlines():
        match = ENTRY.match(line)
        # Continuation lines of a description are indented past any entry's name.
        if not match or len(match["indent"]) > 8:
            continue
        indent = len(match["indent"])
        while parents and parents[-1][0] >= indent:
            parents.pop()
        prefix = parents[-1][1] if parents else ""
        for name in match["names"].split(", "):
            named.add(prefix + name)
            if name.endswith("/"):
                parents.append((indent, prefix + name))
    return named


def folder_map() -> set[str]:
    block = section("The folder map").split("```\n", 1)[1].split("```", 1)[0]
    return map_entries(block)


def tree() -> set[str]:
    """Every package folder of the two packages and every module at their top level."""
    found: set[str] = set()
    for package in PACKAGES:
        for init in (ROOT / package).rglob("__init__.py"):
            folder = init.parent.relative_to(ROOT)
            if folder.as_posix() != package:
                found.add(folder.as_posix() + "/")
        for module in (ROOT / package).glob("*.py"):
            if module.name not in {"__init__.py", "__main__.py"}:
                found.add(module.relative_to(ROOT).as_posix())
    return found


def test_the_parser_reads_nesting_lists_and_continuations():
    block = (
        "pkg/\n"
        "  a.py, b.py         two modules\n"
        "  sub/               a folder whose description\n"
        "                     goes on here/ and names words.py\n"
        "    inner/           nested\n"
        "  c.py               last\n"
        "tests/               the tests\n"
    )
    assert map_entries(block) == {
        "pkg/",
        "pkg/a.py",
        "pkg/b.py",
        "pkg/sub/",
        "pkg/sub/inner/",
        "pkg/c.py",
        "tests/",
    }


def test_the_map_names_every_package_folder_and_top_level_module():
    missing = sorted(tree() - folder_map())
    assert not missing, f"docs/architecture.md's folder map does not name {missing}"


def test_everything_the_map_names_exists_and_has_a_docstring():
    for path in sorted(folder_map()):
        target = ROOT / path
        assert target.exists(), f"docs/architecture.md's folder map names {path}, which is gone"
        source = target / "__init__.py" if path.endswith("/") else target
        if source.suffix == ".py" and source.exists():
            assert source.read_text().lstrip().startswith(('"""', 'r"""', "'''")), (
                f"{source.relative_to(ROOT)} has no module docstring to say what it is for"
            )


def trainer_example() -> str:
    return section("Adding a trainer").split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow
def test_the_trainer_example_trains_checkpoints_and_resumes(tmp_path):
    script = tmp_path / "bandit.py"
    script.write_text(trainer_example())
    out = tmp_path / "out"

    def run(*flags: str) -> list[dict]:
        env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        command = [sys.executable, str(script), "--output-dir", str(out), *flags]
        done = subprocess.run(
            [*command, "--learning-rate", "0.01"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]

    lines = run("--num-iterations", "10")
    assert [line["iteration"] for line in lines] == list(range(10))
    # Every step moves towards the paying arm (the reward minus the mean, signed by the arm).
    preference = [line["preference"] for line in lines]
    assert preference == sorted(preference) and preference[0] < preference[-1]
    assert (out / "final_model" / "preference.json").exists()
    resumed = run("--num-iterations", "12")
    assert [line["iteration"] for line in resumed] == list(range(12))
    assert resumed[:10] == lines  # resuming keeps the lines before the checkpoint

    bad = subprocess.run(
        [sys.executable, str(script), "--output-dir", str(out), "--pulls", "0"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=300,
    )
    assert bad.returncode == 2 and "pulls" in bad.stderr
