"""accelerate's tied-weights notice is silenced, with or without its process prefix."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("torch")

from baselines.training.checkpoints import _QUIET


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("Removed shared tensor {'lm_head.weight'} while saving. This should be OK", False),
        ("[RANK 0] Removed shared tensor {'lm_head.weight'} while saving.", False),
        ("[RANK 0] Saving current state to runs/x", True),
    ],
)
def test_the_tied_weights_notice_is_dropped(message: str, shown: bool) -> None:
    record = logging.LogRecord("accelerate.utils.other", logging.WARNING, "", 0, message, (), None)
    assert _QUIET.filter(record) is shown
