"""Progress without a terminal: a line whenever nothing was said for a while, naming the phase."""

from __future__ import annotations

import contextlib
import io
import logging
import time

import pytest

from baselines.progress import heartbeat, phase, say, status


@pytest.fixture
def vllm_warnings_pass():
    # Other tests in this process may have configured vLLM's logger (its level comes
    # from VLLM_LOGGING_LEVEL when vLLM configures it): these tests check the routing.
    vllm, disabled = logging.getLogger("vllm"), logging.root.manager.disable
    level = vllm.level
    vllm.setLevel(logging.NOTSET)
    logging.disable(logging.NOTSET)
    yield
    vllm.setLevel(level)
    logging.disable(disabled)


def test_status_names_the_innermost_phase_then_the_outer_ones():
    with phase("iteration 2/5"), phase("sample", total=32, unit="episodes") as sample:
        sample.advance(12)
        sample.note = "96 turns sampled"
        line = status()
    assert line.startswith("sample: 12/32 episodes, ")
    assert line.endswith(" s, 96 turns sampled (iteration 2/5)")
    assert status() == "working"  # every phase closed


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        # the outer phases with their counts, innermost first
        (
            [
                ("iteration 3/5", None, ""),
                ("sampling", 32, "episodes"),
                ("generate", 32, "completions"),
            ],
            "generate: 0/32 completions, 0 s (sampling: 0/32 episodes; iteration 3/5)",
        ),
        # an outer phase named as the one inside it is said once
        (
            [("iteration 1/5", None, ""), ("evaluation", None, ""), ("evaluation", 12, "episodes")],
            "evaluation: 0/12 episodes, 0 s (iteration 1/5)",
        ),
        (
            [("warm start", None, ""), ("teacher play", 8, "")],
            "teacher play: 0/8, 0 s (warm start)",
        ),
    ],
)
def test_status_counts_the_outer_phases_and_names_each_once(phases, expected):
    with contextlib.ExitStack() as stack:
        for name, total, unit in phases:
            stack.enter_context(phase(name, total, unit)).started = 0.0
        assert status(now=0.2) == expected


def test_a_sampler_phase_shows_a_bar_when_the_rollout_around_it_does(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setattr("baselines.progress.in_terminal", lambda: True)
    with phase("sampling", 2, "episodes", bar=False), phase("generate", 4, bar=None) as inner:
        assert inner.bar is None
    with phase("sampling", 2, "episodes", bar=True), phase("generate", 4, bar=None) as inner:
        assert inner.bar is not None
        inner.advance(3)
        assert inner.bar.n == 3


def test_a_phase_that_counts_nothing_says_how_long_it_has_run():
    with phase("start the vLLM engine") as started:
        started.started -= 42
        assert status() == "start the vLLM engine, 42 s"


def test_a_silent_stretch_gets_a_line_and_a_talkative_one_none():
    out = io.StringIO()
    with heartbeat(every=0.2, stream=out), phase("train", total=4, unit="optimizer steps") as t:
        t.advance()
        time.sleep(0.5)  # silent: about two lines
        quiet = out.getvalue().splitlines()
        for _ in range(5):  # something said every 0.1 s: no heartbeat line
            say("iteration line", stream=out)
            time.sleep(0.1)
    lines = out.getvalue().splitlines()
    assert 1 <= len(quiet) <= 3
    assert all(line.startswith("train: 1/4 optimizer steps, ") for line in quiet)
    assert lines[len(quiet) :] == ["iteration line"] * 5


def test_a_heartbeat_switched_off_prints_nothing():
    out = io.StringIO()
    with heartbeat(every=0.05, enabled=False, stream=out), phase("evaluate"):
        time.sleep(0.2)
    assert out.getvalue() == ""


def test_library_noise_goes_to_the_run_folder_and_ours_stays_on_the_console(
    tmp_path, capsys, vllm_warnings_pass
):
    import warnings

    from baselines.library_logs import library_logs_to

    log = tmp_path / "libraries.log"
    vllm = logging.getLogger("vllm.llm_envs_test.model_executor")
    with library_logs_to(log):
        vllm.warning("RotaryEmbedding: Failed to load weights")
        logging.getLogger("transformers.modeling_utils").warning("loading weights")
        warnings.warn_explicit("a deprecation", FutureWarning, "/x/site-packages/torch/nn.py", 3)
        warnings.warn_explicit("a debate of two", UserWarning, "/x/site-packages/mine.py", 5)
    text = log.read_text()
    assert "RotaryEmbedding: Failed to load weights" in text
    assert "loading weights" in text and "a deprecation" in text
    assert "a debate of two" not in text
    err = capsys.readouterr().err
    assert "RotaryEmbedding" not in err and "deprecation" not in err
    # Restored afterwards: the library's logger propagates again, the file gets nothing more.
    assert vllm.propagate or logging.getLogger("vllm").propagate is not False
    logging.getLogger("vllm").warning("after the run")
    assert "after the run" not in log.read_text()


def test_library_logs_stay_on_the_console_when_asked(tmp_path, monkeypatch):
    from baselines.library_logs import library_logs_to

    monkeypatch.setenv("LLM_ENVS_LIBRARY_LOGS", "console")
    with library_logs_to(tmp_path / "libraries.log"):
        logging.getLogger("vllm").warning("engine noise")
    assert not (tmp_path / "libraries.log").exists()


def test_a_library_logger_switched_off_elsewhere_still_reaches_the_file(
    tmp_path, vllm_warnings_pass
):
    from baselines.library_logs import library_logs_to

    quiet = logging.getLogger("vllm.llm_envs_test.switched_off")
    quiet.disabled = True  # as a dictConfig with disable_existing_loggers leaves it
    with library_logs_to(tmp_path / "libraries.log"):
        quiet.warning("still recorded")
    assert "still recorded" in (tmp_path / "libraries.log").read_text()
    assert quiet.disabled  # put back


def test_an_output_folder_that_cannot_be_made_loses_the_records_quietly(capsys):
    from baselines.library_logs import library_logs_to

    with library_logs_to("/proc/no/such/libraries.log"):
        logging.getLogger("vllm").warning("nowhere to go")
    assert "Logging error" not in capsys.readouterr().err
