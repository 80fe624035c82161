"""Every registered environment passes the conformance checks, with its default arguments.

The parameters come from :func:`llm_envs.testing.conformance.registered_env_factories`,
which reads :func:`llm_envs.registration.entries`: a newly registered
environment is checked here without a line of test code. Environments that
need data find it through ``LLM_ENVS_DATA_DIR`` (set in tests and CI).
"""

from __future__ import annotations

import pytest

import llm_envs  # noqa: F401  (registers the environments)
from llm_envs.registration import entries
from llm_envs.testing.conformance import (
    check_aec_env,
    check_parallel_env,
    registered_env_factories,
)

FACTORIES = registered_env_factories()
AEC = sorted(key for key in FACTORIES if key.startswith("aec:"))
PARALLEL = sorted(key for key in FACTORIES if key.startswith("parallel:"))


def test_every_registry_entry_has_a_factory():
    assert sorted(FACTORIES) == sorted(f"{e.env_type}:{e.id}" for e in entries())
    assert AEC and PARALLEL


@pytest.mark.parametrize("key", AEC)
def test_registered_aec_env_conforms(key):
    check_aec_env(FACTORIES[key])


@pytest.mark.parametrize("key", PARALLEL)
def test_registered_parallel_env_conforms(key):
    check_parallel_env(FACTORIES[key])
