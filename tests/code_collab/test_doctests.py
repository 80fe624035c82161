"""The examples in the code-collaboration modules' docstrings run (pytest does not collect them)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "llm_envs.code_collab",
    "llm_envs.code_collab.agents",
    "llm_envs.code_collab.counterfactual",
    "llm_envs.code_collab.env",
    "llm_envs.code_collab.experts",
    "llm_envs.code_collab.feedback",
    "llm_envs.code_collab.prompts",
    "llm_envs.code_collab.rewards",
    "llm_envs.parsing.python_code",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0 or name == "llm_envs.code_collab"
