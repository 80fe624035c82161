"""``llm-envs new-env NAME [DIR]``: a package of your own environment family, ready to train.

The package it writes holds a small two-player game (a guessing race with
"too low"/"too high" feedback) as a PettingZoo AEC environment, its family,
scripted players, a config, tests that run llm-envs' conformance checks, a
README, and a ``pyproject.toml`` whose ``llm_envs.families`` entry point makes
``--env NAME`` work in every llm-envs command once the package is installed
(``docs/your_own_environment.md``).

It lives in :mod:`llm_envs`, not :mod:`baselines`: what it writes depends on
the environments alone, so ``pip install llm-envs`` (no torch) is enough to
run it.
"""

from llm_envs.scaffold.new_env import main, new_env, template_files

__all__ = ["main", "new_env", "template_files"]
