"""The run folder every trainer writes: config, metrics log with resume, episodes, checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.run_directory import RunDirectory, read_metrics, write_atomically
from baselines.training.checkpoints import (
    checkpoint_iteration,
    describe_checkpoint,
    latest_checkpoint,
    writing_checkpoint,
)
from baselines.training.run import TrainingRun


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_new_run_writes_its_config_and_starts_an_empty_log(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.start('{"seed": 1}')
    assert run.config_path.read_text() == '{"seed": 1}'
    assert run.metrics_path.read_text() == ""
    run.log({"iteration": 0, "loss": 0.5})
    run.log({"loss": 0.25, "iteration": 1})
    assert run.metrics_path.read_text() == (
        '{"iteration": 0, "loss": 0.5}\n{"iteration": 1, "loss": 0.25}\n'
    )


def test_a_new_run_in_an_old_folder_drops_the_old_lines(tmp_path):
    run = RunDirectory(tmp_path)
    run.start("{}")
    run.log({"iteration": 0})
    RunDirectory(tmp_path).start("{}")  # resume_from=0: a fresh start
    assert run.metrics_path.read_text() == ""


def test_resuming_keeps_the_lines_before_the_checkpoint_and_repairs_a_torn_line(tmp_path):
    run = RunDirectory(tmp_path)
    run.start('{"lr": 1}')
    for i in range(4):
        run.log({"iteration": i})
    with run.metrics_path.open("a") as f:
        f.write('{"iteration": 4, "lo')  # killed while writing
    with pytest.warns(UserWarning, match="torn last line"):
        RunDirectory(tmp_path).start('{"lr": 1}', resume_from=2)
    assert lines(run.metrics_path) == [{"iteration": 0}, {"iteration": 1}]


def test_resuming_with_other_settings_warns_and_names_them(tmp_path):
    RunDirectory(tmp_path).start('{"lr": 1, "num_iterations": 5, "seed": 0}')
    with pytest.warns(UserWarning, match=r"changed settings \['lr'\]"):
        RunDirectory(tmp_path).start('{"lr": 2, "num_iterations": 9, "seed": 0}', resume_from=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RunDirectory(tmp_path).start('{"lr": 2, "num_iterations": 12, "seed": 0}', resume_from=1)


def test_a_broken_line_inside_the_log_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"iteration": 0}\nnot json\n{"iteration": 2}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2 is not JSON"):
        read_metrics(path)
    path.write_text('{"iteration": 0}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2 is not a JSON object"):
        read_metrics(path)


@settings(max_examples=50, deadline=None)
@given(
    logged=st.integers(0, 8),
    resume=st.integers(0, 8),
    cut=st.integers(1, 30),
)
def test_any_resume_keeps_exactly_the_lines_before_it(tmp_path_factory, logged, resume, cut):
    folder = tmp_path_factory.mktemp("run")
    run = RunDirectory(folder)
    run.start("{}")
    for i in range(logged):
        run.log({"iteration": i, "x": "y" * 20})
    text = run.metrics_path.read_text()
    torn = text[: max(0, len(text) - cut)]  # the kill cut the file here
    run.metrics_path.write_text(torn)
    # What survived the kill, read without read_metrics: whole lines, and a last
    # line that still parses (only the newline was cut).
    survived = []
    for line in torn.splitlines():
        try:
            survived.append(json.loads(line)["iteration"])
        except json.JSONDecodeError:
            break
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        RunDirectory(folder).start("{}", resume_from=resume)
        kept = [row["iteration"] for row in read_metrics(run.metrics_path)]
    assert kept == [i for i in survived if i < resume]


def test_only_the_writer_writes(tmp_path):
    reader = RunDirectory(tmp_path / "run", writer=False)
    reader.start("{}")
    reader.log({"iteration": 0})
    assert reader.write_episodes("iter_00000", [{"a": 1}]) is None
    assert not (tmp_path / "run").exists()


def test_episodes_are_written_as_json_lines_and_stale_ones_removed(tmp_path):
    run = RunDirectory(tmp_path)
    assert run.write_episodes("step_00001", []) is None
    path = run.write_episodes("step_00001", [{"text": "é"}, {"n": 2}])
    assert path == tmp_path / "episodes" / "step_00001.jsonl"
    assert path.read_text(encoding="utf-8") == '{"text": "é"}\n{"n": 2}\n'
    run.write_episodes("iter_00001", [{"n": 3}])
    run.remove_episodes("step_*.jsonl")
    assert sorted(p.name for p in run.episodes_dir.iterdir()) == ["iter_00001.jsonl"]


def test_a_line_without_an_iteration_is_refused(tmp_path):
    run = RunDirectory(tmp_path)
    run.start("{}")
    with pytest.raises(ValueError, match="needs an 'iteration'"):
        run.log({"loss": 1.0})


def test_checkpoints_are_published_whole_and_only_the_newest_kept(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    for iteration in (1, 2, 3):
        with writing_checkpoint(tmp_path, iteration, keep=2) as folder:
            (folder / "weights").write_text(str(iteration))
            assert folder.name.endswith(".tmp")
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["iteration_000002", "iteration_000003"]
    latest = latest_checkpoint(tmp_path)
    assert latest is not None and checkpoint_iteration(latest) == 3

    def fail_while_writing() -> None:
        with writing_checkpoint(tmp_path, 4) as folder:
            (folder / "weights").write_text("half")
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        fail_while_writing()
    assert latest_checkpoint(tmp_path) == latest  # the failed one was never published
    with pytest.raises(ValueError, match="keep must be >= 1"):
        writing_checkpoint(tmp_path, 5, keep=0).__enter__()


class CountingRun(TrainingRun):
    """A trainer whose "model" is a number: the skeleton's loop, seen from outside."""

    def __init__(self, folder: Path, **settings: int) -> None:
        self.config = type("Config", (), {"progress": False, **settings})()
        self.run_dir = RunDirectory(folder)
        checkpoint = latest_checkpoint(folder)
        self.start_iteration = 0 if checkpoint is None else checkpoint_iteration(checkpoint)
        self.value = 0 if checkpoint is None else int((checkpoint / "value").read_text())
        self.run_dir.start("{}", resume_from=self.start_iteration)
        self.calls: list[str] = []

    def train_iteration(self, iteration: int) -> dict[str, Any]:
        self.value += 1
        self.calls.append(f"train {iteration}")
        if iteration == getattr(self.config, "crash_at", -1):
            raise KeyboardInterrupt
        return {"value": self.value}

    def evaluate(self, iteration: int | None = None) -> dict[str, float]:
        self.calls.append(f"eval {iteration}")
        return {"eval/value": float(self.value)}

    def save_checkpoint(self, iteration: int) -> None:
        self.calls.append(f"save {iteration}")
        with writing_checkpoint(self.run_dir.path, iteration) as folder:
            (folder / "value").write_text(str(self.value))

    def save_final_model(self) -> None:
        self.calls.append("final")


def test_the_loop_evaluates_trains_logs_saves_in_that_order(tmp_path):
    run = CountingRun(tmp_path, num_iterations=4, save_every=2, eval_every=2)
    assert run.run() == tmp_path / "metrics.jsonl"
    assert run.calls == [
        "eval 0",
        "train 0",
        "train 1",
        "save 2",
        "eval 2",
        "train 2",
        "train 3",
        "save 4",
        "eval 4",
        "final",
    ]
    rows = lines(run.run_dir.metrics_path)
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r.get("eval/value") for r in rows] == [0.0, None, 2.0, None, 4.0]
    assert [r["progress/done_frac"] for r in rows[:4]] == [0.25, 0.5, 0.75, 1.0]
    # A save's time goes in the next line: iteration 2's (after the save at 2),
    # and the final evaluation's (after the save at 4).
    assert ["time/checkpoint" in r for r in rows] == [False, False, True, False, True]
    assert "time/eval" in rows[-1]


def test_a_crashed_run_resumes_after_its_checkpoint_as_if_uninterrupted(tmp_path):
    crashed = CountingRun(tmp_path / "a", num_iterations=5, save_every=2, eval_every=0, crash_at=3)
    with pytest.raises(KeyboardInterrupt):
        crashed.run()
    resumed = CountingRun(tmp_path / "a", num_iterations=5, save_every=2, eval_every=0)
    assert resumed.start_iteration == 2
    resumed.run()
    whole = CountingRun(tmp_path / "b", num_iterations=5, save_every=2, eval_every=0)
    whole.run()

    def untimed(run: CountingRun) -> list[dict[str, Any]]:
        rows = lines(run.run_dir.metrics_path)
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]

    assert untimed(resumed) == untimed(whole)
    assert [r["iteration"] for r in untimed(resumed)] == [0, 1, 2, 3, 4]
    assert resumed.value == whole.value == 5


def test_outside_a_terminal_progress_is_one_line_per_iteration(tmp_path, capsys):
    class Talking(CountingRun):
        def progress_postfix(self, metrics):
            return {"value": str(metrics["value"])}

    run = Talking(tmp_path, num_iterations=2, save_every=1, eval_every=0, keep_checkpoints=1)
    run.config.progress = True
    run.run()
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("checkpoint iteration_000001: ")
    assert err[0].endswith("keeping the newest 1 (--keep-checkpoints)")
    assert err[1].startswith("iteration 1/2: value 1 (")
    assert err[2].startswith("iteration 2/2: value 2 (")
    assert len(err) == 3


def test_a_checkpoint_says_what_it_costs(tmp_path):
    folder = tmp_path / "iteration_000003"
    folder.mkdir()
    (folder / "optimizer.bin").write_bytes(b"x" * 2_000_000)
    (folder / "model.safetensors").write_bytes(b"x" * 1_000_000)
    (folder / "random_states_0.pkl").write_bytes(b"x" * 10)
    assert describe_checkpoint(folder) == (
        "checkpoint iteration_000003: 3.0 MB (optimizer 2.0 MB, model 1.0 MB)"
    )


@pytest.mark.slow  # starts the trainer's command line: imports torch and accelerate
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "/no/such/dir"], "model '/no/such/dir': no such folder"),
        (["--model", "tiny", "--env-kwargs", '{"num_agent": 2}'], "num_agent"),
        (["--model", "tiny", "--output-dir", "/proc/no/such"], "/proc/no/such"),
    ],
)
def test_setup_mistakes_end_the_command_with_their_message(tmp_path, argv, message):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "baselines.is_trainer",
            "--output-dir",
            str(tmp_path / "run"),
            *argv,
        ],
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "LLM_ENVS_TRACEBACK"},
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("given", "warns"), [("auto", False), (1.0, True), (0.5, False)])
def test_deepspeed_clips_at_the_trainers_max_grad_norm(monkeypatch, tmp_path, given, warns):
    accelerate = pytest.importorskip("accelerate")
    from types import SimpleNamespace

    from accelerate.utils import DistributedType

    from baselines.training.run import make_accelerator

    deepspeed = {"gradient_clipping": given, "train_micro_batch_size_per_gpu": "auto"}
    plugin = SimpleNamespace(deepspeed_config=deepspeed)
    fake = SimpleNamespace(
        distributed_type=DistributedType.DEEPSPEED,
        is_main_process=True,
        state=SimpleNamespace(deepspeed_plugin=plugin),
    )
    monkeypatch.setattr(accelerate, "Accelerator", lambda **kwargs: fake)
    config = SimpleNamespace(
        report_to="none", output_dir=str(tmp_path), project="p", max_grad_norm=0.5
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert make_accelerator(config, cuda=False) is fake
    said = [str(w.message) for w in caught]
    assert said == (
        [
            "the accelerate config's DeepSpeed gradient_clipping=1.0 is replaced by "
            "max_grad_norm=0.5: the trainer's setting clips"
        ]
        if warns
        else []
    )
    # DeepSpeed clips inside its step: with the trainer's value, whatever the config said.
    assert deepspeed == {"gradient_clipping": 0.5, "train_micro_batch_size_per_gpu": 1}


# ------------------------------------------------------------- a folder belongs to one run

IS_RUN = {"model": "tiny", "env": "debate", "task": "default", "lora_r": 0, "num_iterations": 3}


def claim(path, trainer="is_trainer", overwrite=False, **settings):
    RunDirectory(path).claim(trainer, json.dumps({**IS_RUN, **settings}), overwrite=overwrite)


def fill(path, settings=IS_RUN):
    run = RunDirectory(path)
    run.start(json.dumps(settings))
    run.log({"iteration": 0, "loss": 1.0})
    (path / "checkpoints" / "iteration_000001").mkdir(parents=True)


def test_a_new_folder_and_the_same_run_are_this_runs(tmp_path):
    claim(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "run.json").read_text()) == {"trainer": "is_trainer"}
    fill(tmp_path / "run")
    claim(tmp_path / "run", num_iterations=5)  # the same run, to train further: it resumes
    assert (tmp_path / "run" / "checkpoints" / "iteration_000001").is_dir()


@pytest.mark.parametrize(
    ("trainer", "settings", "message"),
    [
        ("grpo", {}, "holds a run of is_trainer, not grpo"),
        ("is_trainer", {"model": "smollm2-135m-instruct"}, "model='tiny'.*'smollm2-135m-instruct'"),
        ("is_trainer", {"env": "expert_iteration"}, "env='debate', and this one has env='exp"),
        ("is_trainer", {"lora_r": 8}, "lora_r=0"),
    ],
)
def test_another_runs_folder_is_refused_and_loses_nothing(tmp_path, trainer, settings, message):
    from baselines.run_directory import RunFolderError

    path = tmp_path / "run"
    claim(path)
    fill(path)
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    with pytest.raises(RunFolderError, match=message) as refused:
        claim(path, trainer, **settings)
    assert "--overwrite" in str(refused.value) and "--output-dir" in str(refused.value)
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before


def test_overwrite_deletes_the_other_run_and_takes_the_folder(tmp_path):
    path = tmp_path / "run"
    claim(path)
    fill(path)
    (path / "notes.txt").write_text("mine")  # not a run file: kept
    claim(path, "grpo", overwrite=True)
    assert not (path / "checkpoints").exists() and not (path / "metrics.jsonl").exists()
    assert json.loads((path / "run.json").read_text()) == {"trainer": "grpo"}
    assert (path / "notes.txt").read_text() == "mine"


def test_a_folder_from_before_run_json_is_judged_by_its_settings(tmp_path):
    from baselines.run_directory import RunFolderError

    path = tmp_path / "run"
    fill(path)  # no run.json: config.json and metrics only
    claim(path, num_iterations=9, overwrite=False)  # its settings: the same trainer, resumed
    grpo = tmp_path / "grpo"
    fill(grpo, {"model": "tiny", "env": "debate", "loss_type": "dapo", "beta": 0.0, "vllm": "auto"})
    with pytest.raises(RunFolderError, match="another trainer"):
        claim(grpo, warm_start_steps=0, eval_groups=2, sampler="auto", packing="auto")
    stray = tmp_path / "stray"
    (stray / "checkpoints").mkdir(parents=True)
    with pytest.raises(RunFolderError, match=r"without its config\.json"):
        claim(stray)


def test_write_atomically_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("old")
    write_atomically(path, "new \udc80")  # a lone surrogate no UTF-8 file can hold
    assert path.read_text(encoding="utf-8") == "new \\udc80"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
