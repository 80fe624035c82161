"""Test-wide settings: the offline benchmark data, hypothesis profiles, and the test tiers."""

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

#: The longest tests (the main jobs' learning proofs, minutes each, most of CI's time).
LONGEST = frozenset(
    {"test_smollm2_learns_the_debate_format", "test_smollm2_reward_rises_on_short_sums"}
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest first: the learning tests, then the other training tests, then the rest.

    With ``-n 2`` and ``--dist loadgroup`` (pyproject's addopts) each test is sent to
    whichever worker is free, in this order: the learning tests start at once on
    different workers, and the short tests fill the gaps at the end. (Under xdist's
    default ``load``, the first quarter of the tests is dealt out in two blocks, and
    all three learning tests fell into one worker's block.) The order within each
    tier is the files' order.
    """

    def tier(item: pytest.Item) -> int:
        if getattr(item, "originalname", item.name) in LONGEST:
            return 0
        return 1 if item.get_closest_marker("training") is not None else 2

    items.sort(key=tier)


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
