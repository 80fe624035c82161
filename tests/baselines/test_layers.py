"""``baselines`` imports downwards only: a layer never imports a layer above it.

Read from the source with ``ast`` (lazy imports inside functions included), so
the rule holds for every import, not just the ones a test happens to run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "baselines"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"library_logs", "precision", "progress", "threads"}),
    frozenset({"types", "models", "run_directory"}),
    frozenset({"config", "data", "samplers"}),
    frozenset({"cli", "rollouts", "report", "policies"}),  # policies: samplers' deprecated alias
    frozenset({"env_families", "training"}),
    frozenset({"eval"}),
    frozenset({"league", "check"}),
    frozenset({"is_trainer", "grpo", "magrpo", "verl"}),
    frozenset({"commands"}),
)
"""The units of ``baselines`` (a top-level module or a subpackage), lowest first."""


def _unit(module: str) -> str:
    """``baselines.eval.run`` -> ``eval``; ``baselines.types`` -> ``types``."""
    return module.split(".")[1]


def _layer(unit: str) -> int:
    for level, units in enumerate(LAYERS):
        if unit in units:
            return level
    raise AssertionError(f"baselines.{unit} is in no layer of LAYERS: add it where it belongs")


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.startswith("baselines.")]
    return found


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if p.parent != ROOT or p.name != "__init__.py")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_imports_only_its_own_unit_and_lower_layers(path):
    relative = path.relative_to(ROOT).with_suffix("")
    unit = relative.parts[0]
    own = _layer(unit)
    upward = [
        f"line {line}: {target}"
        for line, target in _imports(path)
        if _unit(target) != unit and _layer(_unit(target)) >= own
    ]
    assert not upward, f"baselines/{relative}.py imports a layer at or above its own: {upward}"


def test_every_unit_is_placed_in_a_layer():
    units = {p.relative_to(ROOT).with_suffix("").parts[0] for p in _modules()}
    for unit in units:
        _layer(unit)


def _family_packages() -> set[str]:
    """``llm_envs.debate``, ``llm_envs.textarena``...: the packages of the registered families."""
    from llm_envs.registration import family_class, family_names

    return {".".join(family_class(n).__module__.split(".")[:2]) for n in family_names()}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_baselines_imports_no_family(path):
    # Every trainer, the evaluator and the report take a family through the protocol
    # (llm_envs.family, llm_envs.registration): none imports a family's own package.
    families = _family_packages()
    named = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named += [(node.lineno, node.module)]
        elif isinstance(node, ast.Import):
            named += [(node.lineno, a.name) for a in node.names]
    wrong = [f"line {n}: {m}" for n, m in named if ".".join(m.split(".")[:2]) in families]
    assert not wrong, f"baselines/{path.relative_to(ROOT)} imports a family: {wrong}"
