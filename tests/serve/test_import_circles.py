"""The rendezvous modules and the bridges sit in no import circle, lazy imports included.

Read from the source (``ast``, as ``tests/test_layers.py`` reads it): a circle
hidden in a function body or under ``TYPE_CHECKING`` counts too.
"""

from __future__ import annotations

import ast

import pytest

from tests.test_layers import imported, modules

CHECKED = (
    "llm_envs.serve.meetings",
    "llm_envs.serve.coordinators",
    "llm_envs.serve.rendezvous",
    "llm_envs.bridges.openenv",
    "llm_envs.bridges.trl",
    "llm_envs.bridges.verifiers",
)


def import_graph() -> dict[str, set[str]]:
    """Each module of llm_envs to the modules of llm_envs it names in an import."""
    found = modules()
    names = {name for name, _ in found}
    return {
        name: {
            target
            for _, target in imported(ast.parse(path.read_text()), name, path.name == "__init__.py")
            if target in names and target != name
        }
        for name, path in found
    }


def reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), list(graph[start])
    while todo:
        module = todo.pop()
        if module == goal:
            return True
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, ())
    return False


def test_a_circle_is_found():
    assert reaches({"a": {"b"}, "b": {"a"}}, "a", "a")
    assert not reaches({"a": {"b"}, "b": set()}, "a", "a")


@pytest.mark.parametrize("module", CHECKED)
def test_no_module_here_imports_its_way_back_to_itself(module):
    assert not reaches(import_graph(), module, module), f"{module} is in an import circle"
