"""Model names: the local models, folders, and hub ids that cannot be had offline fail at once."""

from __future__ import annotations

import time

import pytest

from baselines import models
from baselines.models import DEFAULT_MODEL, resolve_model


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    models.hub_reachable.cache_clear()
    yield
    models.hub_reachable.cache_clear()


@pytest.mark.parametrize(
    ("name", "nearest"),
    [
        ("smollm2", DEFAULT_MODEL),
        ("SmolLM2-135M", DEFAULT_MODEL),
        ("tin", "tiny"),
    ],
)
def test_a_near_miss_offline_fails_at_once_naming_the_nearest(offline, name, nearest):
    start = time.perf_counter()
    with pytest.raises(FileNotFoundError, match=f"did you mean '{nearest}'"):
        resolve_model(name)
    assert time.perf_counter() - start < 2  # no download retries (52 s before)


def test_an_unknown_hub_id_offline_names_what_would_work(offline):
    with pytest.raises(FileNotFoundError, match="hub cannot be reached") as refused:
        resolve_model("Qwen/Qwen2.5-0.5B-Instruct")
    assert "did you mean" not in str(refused.value)  # nothing near: no guess


def test_a_hub_id_passes_through_when_the_hub_answers(monkeypatch):
    monkeypatch.setattr(models, "hub_reachable", lambda: True)
    assert resolve_model("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"


def test_hub_offline_settings_are_read():
    models.hub_reachable.cache_clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        assert models.hub_reachable() is False
    models.hub_reachable.cache_clear()


@pytest.mark.slow
def test_building_the_tiny_model_prints_nothing_to_stdout(tmp_path):
    # A test server builds it before announcing itself: stdout must stay the server's.
    import subprocess
    import sys

    built = subprocess.run(
        [sys.executable, "-c", "import sys; from baselines.models import tiny_checkpoint; "
         "tiny_checkpoint(sys.argv[1])", str(tmp_path / "tiny")],
        capture_output=True,
        timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout == b""
    assert (tmp_path / "tiny" / "config.json").exists()
