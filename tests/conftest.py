"""Test-wide settings: data, hypothesis profiles, tiers, and the order of work under ``-n``.

The offline benchmark data, the hypothesis profiles, the test tiers' check,
and which tests start first and go to one worker together under ``pytest -n``.
"""

import os
from pathlib import Path

import pytest
from hypothesis import settings

_SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# Tests run offline: point the task loaders at ../shared/data unless told otherwise.
if "LLM_ENVS_DATA_DIR" not in os.environ and _SHARED_DATA.is_dir():
    os.environ["LLM_ENVS_DATA_DIR"] = str(_SHARED_DATA)

settings.register_profile("ci", max_examples=200, deadline=None)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

#: Fixtures that build or load a model (tests/baselines/conftest.py): a test that
#: uses one, directly or through another fixture, must be marked ``slow``.
MODEL_FIXTURES = frozenset({"tiny_model_dir", "tiny_model", "vllm_server"})


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail, before any fixture runs, a test whose tier marker is missing.

    The tiers: ``pytest -m "not slow"`` must never load a model, so a test that
    uses a model fixture must be marked ``slow``; and ``training`` is a part of
    ``slow``.
    """
    if item.get_closest_marker("slow") is not None:
        return
    if item.get_closest_marker("training") is not None:
        pytest.fail(f"{item.nodeid} is marked training but not slow: mark it slow too")
    loads = sorted(MODEL_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    if loads:
        pytest.fail(
            f"{item.nodeid} uses {', '.join(loads)}, which loads a model: mark it "
            "@pytest.mark.slow (and @pytest.mark.training if it trains)"
        )


#: Test files whose tests share a vLLM server (``vllm_server``, a session fixture: one
#: per worker that needs it): under ``pytest -n`` one worker runs them all.
VLLM_SERVER_FILES = frozenset(
    {
        "tests/baselines/eval/test_models.py",
        "tests/baselines/grpo/test_server_sampling.py",
        "tests/baselines/samplers/test_build.py",
        "tests/baselines/samplers/test_openai_policy.py",
        "tests/baselines/samplers/test_two_servers.py",
    }
)

#: The longest test files (and the vLLM group), most CPU seconds first: they start
#: first, so that under ``pytest -n 2`` the two learning tests run side by side
#: from the start instead of one waiting for the other at the end. Only an order:
#: a file missing here costs balance, never a test (tests/test_ci.py checks the names).
SLOWEST_FIRST = (
    "tests/baselines/is_trainer/test_debate_learning.py",
    "tests/baselines/grpo/test_learning.py",
    "tests/test_doc_snippets.py",
    "vllm",
    "tests/examples/test_examples_is_trainer.py",
    "tests/baselines/magrpo/test_accelerate.py",
    "tests/baselines/is_trainer/test_accelerate_configs.py",
    "tests/baselines/is_trainer/test_learning.py",
    "tests/baselines/is_trainer/test_deepspeed.py",
)


def scheduling_unit(nodeid: str) -> str:
    """The unit ``pytest -n`` hands to one worker: a test's file, or ``vllm`` for the server's."""
    path = nodeid.split("::")[0]
    return "vllm" if path in VLLM_SERVER_FILES else path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the units of :data:`SLOWEST_FIRST` first; the rest keep their order."""
    rank = {unit: i for i, unit in enumerate(SLOWEST_FIRST)}
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(
        key=lambda item: (rank.get(scheduling_unit(item.nodeid), len(rank)), order[id(item)])
    )


class UnitScheduling:
    """A plugin: ``-n``'s default distribution (``load``) by whole units, in the collection's order.

    A worker takes a file at a time, so a module's fixtures are built once
    (split across workers, ``load`` builds them on both), and the vLLM tests
    share one server; units go out in :func:`pytest_collection_modifyitems`'
    order, the longest first, each to the worker that runs out of work first.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: object) -> object:
        if config.getvalue("dist") != "load":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class ByUnit(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return scheduling_unit(nodeid)

        config.option.loadscopereorder = False  # (by default: most tests first)
        return ByUnit(config, log)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):  # (its hook is unknown without it)
        config.pluginmanager.register(UnitScheduling(), "llm_envs_unit_scheduling")
