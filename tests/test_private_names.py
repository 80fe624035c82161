"""No module reads another module's underscore-private names (docs/contributing.md).

A name that starts with one underscore is its module's (or its class's) own: it
may change without notice. A module that needs another's name gets it made
public. This test reads every module of ``llm_envs``, ``baselines``, ``bench``
and ``examples`` (AST, no import) and refuses:

* ``from x import _y``: another module's private name;
* ``x._y`` where ``x`` is a module this one imported;
* ``obj._y`` on an object that is not ``self``, ``cls`` or ``super()``, unless
  ``_y`` is this module's own: a method or attribute (``self._y = ...``) of a
  class defined here (``other._y`` in ``__eq__``, a clone's ``_y``, a module
  global's), so the module reads what it defines.

Importing a private submodule from inside its own package (``from
llm_envs.sandbox import _wire`` in ``llm_envs/sandbox/``) is the package's own
business. Dunder names (``__init__``) are public protocol. :data:`ALLOWED` lists the
standard-library and third-party privates that have no public equivalent, each
with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("llm_envs", "baselines", "bench", "examples")

ALLOWED: dict[str, str] = {
    # namedtuple's documented API is underscored so that it cannot clash with field names.
    "_replace": "namedtuple's documented method",
    "_asdict": "namedtuple's documented method",
    "_fields": "namedtuple's documented attribute",
    "_make": "namedtuple's documented class method",
    # The standard library's own documented escapes.
    "sys._getframe": "the caller's frame: no public equivalent",
    "os._exit": "leave a forked child at once, without cleanup handlers",
    # argparse: before Python 3.13 it reads "-1e-5" as an unknown option; the matcher
    # of negative numbers has no public setting (baselines.cli).
    "parser._negative_number_matcher": "argparse's negative-number rule, no public setting",
    # accelerate keeps one precision per process; a second run in another precision
    # (a notebook, a test session) must reset it, and accelerate has no public reset.
    "AcceleratorState._shared_state": "accelerate's per-process state, no public reader",
    "AcceleratorState._reset_state": "accelerate's per-process state, no public reset",
    # PettingZoo's AEC protocol: AECEnv defines these underscored members for its
    # subclasses and wrappers to keep (its own wrappers read env._cumulative_rewards).
    "_cumulative_rewards": "PettingZoo AECEnv's reward tally, read by its wrappers",
    "_was_dead_step": "PettingZoo AECEnv's step of a finished agent",
    "_clear_rewards": "PettingZoo AECEnv's reset of this step's rewards",
    # TextArena's Connect Four checks moves with a backtracking pattern inside this
    # private method; llm_envs.textarena.bounded wraps it (no public hook exists).
    "game._validate_action": "TextArena Connect Four's move check, hardened in place",
}

"""Underscore names that may be read anyway: ``attr`` or ``owner.attr``, and why."""


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _allowed(owner: str | None, attr: str) -> bool:
    return attr in ALLOWED or (owner is not None and f"{owner}.{attr}" in ALLOWED)


def _own_privates(tree: ast.Module) -> set[str]:
    """Private names a class of this module defines: its methods and ``self._x`` attributes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in ast.walk(node):
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name):
                    names.add(item.name)
                if isinstance(item, ast.AnnAssign | ast.Assign):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    for target in targets:
                        if isinstance(target, ast.Name) and _private(target.id):
                            names.add(target.id)  # a class attribute
                        if (
                            isinstance(target, ast.Attribute)
                            and isinstance(target.value, ast.Name)
                            and target.value.id == "self"
                            and _private(target.attr)
                        ):
                            names.add(target.attr)
    return names


def _package_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).parent.parts)


def _imported_modules(tree: ast.Module) -> set[str]:
    """The names this module binds to imported modules (``import x``, ``import x.y as z``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return names


class _Reads(ast.NodeVisitor):
    """Walks a module; ``found`` collects ``(line, what)`` of every forbidden read."""

    def __init__(self, modules: set[str], own: set[str], package: str) -> None:
        self.modules = modules
        self.own_privates = own
        self.package = package
        self.classes: list[str] = []  # the classes being defined, innermost last
        self.own: list[set[str]] = []  # per function: names bound to the own class's objects
        self.found: list[tuple[int, str]] = []

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if not _private(alias.name) or _allowed(node.module, alias.name):
                continue
            source = (node.module or "").replace(".", "/")
            submodule = ROOT / source / alias.name
            inside = node.module == self.package and (
                submodule.with_suffix(".py").is_file() or submodule.is_dir()
            )
            if not inside:  # a private submodule of one's own package is the package's
                self.found.append((node.lineno, f"from {node.module} import {alias.name}"))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        own = {"self", "cls"}
        if self.classes:  # parameters annotated with the class itself: `other: Point`
            for arg in [*node.args.args, *node.args.kwonlyargs]:
                annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                if annotation.strip("'\"") in (self.classes[-1], "Self"):
                    own.add(arg.arg)
        self.own.append(own)
        self.generic_visit(node)
        self.own.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.generic_visit(node)
        if not _private(node.attr):
            return
        value = node.value
        owner = value.id if isinstance(value, ast.Name) else None
        if owner is not None and self.own and owner in self.own[-1]:
            return
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "super":
            return
        if owner is not None and self.classes and owner == self.classes[-1]:
            return  # the class's own name: `Point._cache`
        if _allowed(owner, node.attr) or node.attr in self.own_privates:
            return
        kind = "module" if owner in self.modules else "object"
        self.found.append((node.lineno, f"{ast.unparse(node)} (another {kind}'s private name)"))


def _findings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    reads = _Reads(_imported_modules(tree), _own_privates(tree), _package_of(path))
    reads.visit(tree)
    for line, what in reads.found:
        yield line, f"{path.relative_to(ROOT)}: {what}"


def test_no_module_reads_another_modules_private_names():
    found = {(what, line) for path in _modules() for line, what in _findings(path)}
    new = sorted(f"{what} (line {line})" for what, line in found)
    assert not new, "make these names public where they are defined:\n" + "\n".join(new)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from m import _x", ["from m import _x"]),
        ("import m\nm._x", ["m._x (another module's private name)"]),
        ("obj._x", ["obj._x (another object's private name)"]),
        ("obj.__dict__\nfrom m import __version__", []),
        ("class A:\n    def f(self, other: A):\n        return self._x, other._x, A._y", []),
        ("class A:\n    def f(self):\n        return super()._x()", []),
        (
            "class A:\n    def f(self, b: B):\n        return b._x",
            ["b._x (another object's private name)"],
        ),
        ("import sys\nsys._getframe(1)\np._replace(a=1)", []),
        # the module's own class's private: a clone's, a global instance's
        ("class A:\n    def __init__(self):\n        self._n = 1\nx = A()\nx._n", []),
        ("class A:\n    def _go(self): ...\nfor e in es:\n    e._go()", []),
        ("e._go()", ["e._go (another object's private name)"]),
    ],
)
def test_the_reader_finds_what_it_should(source, expected):
    tree = ast.parse(source)
    reads = _Reads(_imported_modules(tree), _own_privates(tree), "pkg")
    reads.visit(tree)
    assert [what for _, what in reads.found] == expected
