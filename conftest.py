"""What pytest collects in this checkout, whichever folder a run starts from."""

import importlib.util

# verl and verifiers pin older packages than the main environment: each adapter
# is tested in a virtualenv of its own (.ci/verl.sh, .ci/verifiers.sh). Where
# the engine is missing, its module's doctests are not collected.
collect_ignore = [
    module
    for engine, module in (
        ("verl", "baselines/verl/agent_loop.py"),
        ("verifiers", "llm_envs/bridges/verifiers.py"),
    )
    if importlib.util.find_spec(engine) is None
]
# Deprecated aliases of moved modules (one release): no doctests of their own.
collect_ignore += [
    "baselines/policies/__init__.py",
    "baselines/grpo/environment.py",
    "baselines/grpo/remote.py",
    "baselines/grpo/adapters.py",
    "baselines/grpo/family_rollout.py",
    "llm_envs/adapters/verifiers_env.py",
    "llm_envs/serve/openenv_view.py",
]
