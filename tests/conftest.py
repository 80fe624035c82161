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
