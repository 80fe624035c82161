"""Layers: the shared modules of llm_envs import no family, and llm_envs imports no trainer.

Every module under ``llm_envs/`` is parsed (``ast``; nothing is imported), and
each of its imports is read, those inside functions (lazy imports) included.
The family folders come from the registry: the package of each entry's
``family_entry_point``, so a new family is covered as soon as it is registered.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_envs.registration import BUILTIN_ENVIRONMENTS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llm_envs"
FORBIDDEN_TOP_LEVEL = ("baselines", "torch")


def family_packages() -> tuple[str, ...]:
    """The family folders, as packages: ``llm_envs.debate`` for ``llm_envs.debate.family:...``."""
    packages = {
        str(entry.family_entry_point).partition(":")[0].rpartition(".")[0]
        for entry in BUILTIN_ENVIRONMENTS
        if entry.family_entry_point
    }
    return tuple(sorted(packages))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> list[tuple[str, Path]]:
    """Every module of llm_envs, by dotted name."""
    return sorted(
        (module_name(path), path)
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    )


def imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """``(line, dotted name)`` of every import in ``tree``, at any depth.

    ``from a import b`` yields both ``a`` and ``a.b`` (``b`` may be a submodule);
    relative imports are resolved against ``module``; ``importlib.import_module``
    and ``__import__`` calls with a literal name count as imports too.
    """
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            yield node.lineno, source
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{source}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            )
        ):
            yield node.lineno, node.args[0].value


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def crossings(source: str, module: str, is_package: bool, families: tuple[str, ...]) -> list[str]:
    """What ``source`` (the text of ``module``) imports that its layer must not."""
    own = [family for family in families if within(module, family)]
    found = []
    for line, name in imported(ast.parse(source), module, is_package):
        if name.split(".")[0] in FORBIDDEN_TOP_LEVEL:
            found.append(f"{module}:{line} imports {name} (llm_envs never imports it)")
        elif not own:
            found += [
                f"{module}:{line} imports {name} (a shared module importing the family {family})"
                for family in families
                if within(name, family)
            ]
    return sorted(set(found))


def test_the_family_folders_come_from_the_registry():
    families = family_packages()
    assert {"llm_envs.debate", "llm_envs.code_collab", "llm_envs.expert_iteration"} <= set(families)
    for family in families:
        folder = ROOT.joinpath(*family.split("."))
        assert (folder / "__init__.py").is_file(), f"{family} is registered but has no folder"


def test_no_shared_module_imports_a_family_and_nothing_imports_a_trainer():
    families = family_packages()
    found = [
        crossing
        for module, path in modules()
        for crossing in crossings(
            path.read_text(encoding="utf-8"), module, path.name == "__init__.py", families
        )
    ]
    assert len(modules()) > 20, "the module walk found too few modules"
    assert not found, "imports across layers:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "llm_envs.spaces",
            "from llm_envs.debate.protocol import TAGS",
            "llm_envs.debate.protocol",
        ),
        ("llm_envs.spaces", "def f():\n    import llm_envs.code_collab.env", "code_collab.env"),
        ("llm_envs.testing.conformance", "from llm_envs import debate", "llm_envs.debate"),
        ("llm_envs.testing.conformance", "from ..debate import env", "llm_envs.debate"),
        ("llm_envs.tasks", "from ..expert_iteration import env", "llm_envs.expert_iteration"),
        ("llm_envs.parsing.tags", "importlib.import_module('llm_envs.debate')", "llm_envs.debate"),
        ("llm_envs.debate.env", "import torch", "torch"),
        ("llm_envs.records", "from baselines.types import Datum", "baselines.types"),
    ],
)
def test_a_crossing_is_named(module, source, expected):
    is_package = module == "llm_envs.tasks"
    found = crossings(source, module, is_package, family_packages())
    assert found and all(f.startswith(f"{module}:") for f in found)
    assert any(expected in f for f in found), found


def test_a_family_may_import_shared_modules_and_itself():
    source = (
        "from llm_envs.spaces import SAMPLE_FRAGMENTS\n"
        "from llm_envs.debate.protocol import TAGS\n"
        "from . import rewards\n"
    )
    assert crossings(source, "llm_envs.debate.env", False, family_packages()) == []
