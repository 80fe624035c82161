"""The skeleton every local trainer fills in: the iteration loop, seeding, progress, main.

A trainer subclasses :class:`TrainingRun` and writes what is its own: how an
iteration samples and optimizes (:meth:`TrainingRun.train_iteration`), how it
evaluates, and what its checkpoints and final model hold. The skeleton owns
the rest, the same for every trainer:

* the loop from the start (or the resumed iteration) to ``num_iterations``;
* per iteration: evaluation when due (before training, so ``eval/...`` at
  iteration ``k`` measures the weights after ``k`` iterations), timings, one
  line in ``metrics.jsonl``, then a checkpoint when due (its ``time/checkpoint``
  goes in the next line: the next iteration's, or the final evaluation's). Log, then save: a run
  killed in between redoes the iteration and rewrites its line (the other order
  could lose the line);
* after the last iteration: a final evaluation at ``num_iterations``, the final
  model;
* progress: in a terminal, a bar for the iterations (and the phases' own,
  :mod:`baselines.progress`); in a log file, one line per iteration; the size
  of the first checkpoint, once;
* experiment trackers: when the trainer sets :attr:`TrainingRun.accelerator`
  (an ``accelerate.Accelerator`` built with
  :func:`~baselines.training.trackers.make_trackers`' trackers), they are
  started with the config, get every metrics line too, and are finished at
  the end (``report_to``; :mod:`baselines.training.trackers`);
* ``train(config)`` / ``main(argv)`` through :func:`command_line`;
* under ``accelerate launch``: the ``accelerate.Accelerator`` every trainer
  builds the same way (:func:`make_accelerator`), the microbatches of an
  optimizer step (:func:`accumulating`) and the lists every process sends to
  every other (:func:`gather_lists`).

:class:`~baselines.is_trainer.trainer.ISTrainer` (one model, ``accelerate``) and
:class:`~baselines.magrpo.trainer.MAGRPOTrainer` (a model per agent) are the two
examples to follow.
"""

from __future__ import annotations

import abc
import contextlib
import os
import random
import shlex
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from baselines.cli import parse_config
from baselines.config import TrainerConfig
from baselines.library_logs import library_logs_to
from baselines.precision import resolve_device
from baselines.progress import heartbeat, in_terminal, phase, say
from baselines.run_directory import LIBRARY_LOG, RunDirectory
from baselines.threads import apply_threads
from baselines.training.checkpoints import (
    checkpoint_iteration,
    describe_checkpoint,
    latest_checkpoint,
)
from baselines.training.lora import require_peft
from baselines.training.trackers import (
    make_trackers,
    numeric_metrics,
    require_tracker,
    tracker_config,
)
from llm_envs.seeding import derive_seed

__all__ = [
    "LoopSettings",
    "RunStart",
    "TrainingRun",
    "accumulating",
    "command_line",
    "console",
    "finish_run",
    "gather_lists",
    "interrupts_end_cleanly",
    "make_accelerator",
    "progress_bar",
    "seed_everything",
    "setup_errors_exit",
    "start_run",
    "train_with",
]

ConfigT = TypeVar("ConfigT", bound=TrainerConfig)


class LoopSettings(Protocol):
    """The settings the loop reads from a trainer's config."""

    @property
    def num_iterations(self) -> int:
        """Iterations to train, in all (a resumed run continues up to it)."""

    @property
    def save_every(self) -> int:
        """A checkpoint every this many iterations and after the last; 0: after the last only."""

    @property
    def eval_every(self) -> int:
        """Evaluate before every this many iterations and after the last; 0: never."""

    @property
    def progress(self) -> bool:
        """Show a progress bar."""


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators (every CUDA device too)."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - the legacy global generator is what we seed
    torch.manual_seed(seed)  # seeds every CUDA device as well


def make_accelerator(config: Any, *, cuda: bool, mixed_precision: str = "no") -> Any:
    """The run's ``accelerate.Accelerator``: its device, its trackers, DeepSpeed's batch size.

    Under ``accelerate launch`` it joins the launched processes (DDP, FSDP or
    DeepSpeed, as the launcher's config says); alone it is one process.

    Args:
        config: a trainer config (``report_to``, ``output_dir``, ``project``).
        cuda: whether the run trains on CUDA; otherwise on CPU.
        mixed_precision: ``"bf16"`` for accelerate's autocast, or ``"no"``.

    Under DeepSpeed, ``train_micro_batch_size_per_gpu`` is set to 1 unless the
    DeepSpeed config gives it: ``prepare`` refuses to start without it, and
    the trainers cut their own microbatches (``max_tokens_per_microbatch``),
    so DeepSpeed's batch bookkeeping has nothing else to go by. DeepSpeed
    clips gradients inside its own step: its ``gradient_clipping`` is set to
    the trainer's ``max_grad_norm`` (0: none), with a warning when the
    accelerate config gave another value.
    """
    # accelerate ships no type information (no py.typed).
    from accelerate import Accelerator  # type: ignore[import-untyped]
    from accelerate.state import AcceleratorState  # type: ignore[import-untyped]
    from accelerate.utils import DistributedType  # type: ignore[import-untyped]

    earlier = AcceleratorState._shared_state.get("_mixed_precision")
    if earlier is not None and earlier != mixed_precision:
        # accelerate keeps the first Accelerator's precision for the whole process and
        # refuses another: a second run in the same process (a notebook, a test
        # session) in another precision starts its state afresh. The process group
        # (PartialState) stays.
        AcceleratorState._reset_state()
    accelerator = Accelerator(
        cpu=not cuda,
        mixed_precision=mixed_precision,
        log_with=make_trackers(config.report_to, config.output_dir, config.project) or None,
        project_dir=config.output_dir,
    )
    if accelerator.distributed_type == DistributedType.DEEPSPEED:
        deepspeed = accelerator.state.deepspeed_plugin.deepspeed_config
        if deepspeed.get("train_micro_batch_size_per_gpu", "auto") == "auto":
            deepspeed["train_micro_batch_size_per_gpu"] = 1
        given = deepspeed.get("gradient_clipping", "auto")
        if given != "auto" and float(given) != config.max_grad_norm and accelerator.is_main_process:
            warnings.warn(
                f"the accelerate config's DeepSpeed gradient_clipping={given} is replaced by "
                f"max_grad_norm={config.max_grad_norm}: the trainer's setting clips",
                stacklevel=2,
            )
        deepspeed["gradient_clipping"] = config.max_grad_norm
    return accelerator


@dataclass(frozen=True)
class RunStart:
    """What :func:`start_run` set up: the accelerator, the device, the claimed run folder."""

    accelerator: Any
    cuda: bool
    bf16: bool
    run_dir: RunDirectory


def start_run(
    config: Any, trainer: str, *, accelerate_autocast: bool, seed_per_process: bool
) -> RunStart:
    """The start every local trainer shares, in this order, before any model is loaded.

    1. A missing package (``lora_r``'s peft, ``report_to``'s tracker) fails now.
    2. CPU threads are chosen (``num_threads``, :mod:`baselines.threads`), before any
       engine starts.
    3. The device and precision follow
       :func:`~baselines.precision.resolve_device`'s one rule.
    4. The ``accelerate.Accelerator`` (:func:`make_accelerator`): it autocasts to
       bf16 itself when ``accelerate_autocast`` and bf16 apply (a trainer that
       autocasts on its own passes False and reads :attr:`RunStart.bf16`).
    5. Seeding: ``config.seed`` on every process, or a seed derived from it and
       the process's rank when ``seed_per_process``.
    6. The run folder is claimed (:meth:`RunDirectory.claim`): a folder of
       another run fails, or is cleared with ``overwrite``, before any work.

    Args:
        config: a trainer config (:class:`~baselines.config.TrainerConfig`).
        trainer: the trainer's name, recorded in ``run.json``.
        accelerate_autocast: let ``accelerate`` autocast to bf16.
        seed_per_process: seed each process differently (its rank mixed in).
    """
    require_peft(config.lora_r)
    require_tracker(config.report_to)
    apply_threads(config.num_threads)
    cuda, bf16 = resolve_device(config.device, config.precision)
    mixed = "bf16" if bf16 and accelerate_autocast else "no"
    accelerator = make_accelerator(config, cuda=cuda, mixed_precision=mixed)
    rank = accelerator.process_index
    seed_everything(derive_seed(config.seed, rank) if seed_per_process else config.seed)
    run_dir = RunDirectory(config.output_dir, writer=accelerator.is_main_process)
    run_dir.claim(trainer, config.to_json(), overwrite=config.overwrite)
    accelerator.wait_for_everyone()
    return RunStart(accelerator=accelerator, cuda=cuda, bf16=bf16, run_dir=run_dir)


@contextlib.contextmanager
def accumulating(accelerator: Any, model: Any, *, last: bool) -> Iterator[None]:
    """Around one microbatch's backward pass: gradients are reduced in the step's last one only.

    Every trainer's optimizer step runs several microbatches, each with its own
    backward pass; the processes' gradients must be reduced once, after the
    last. DDP and FSDP skip their reduction inside ``accelerator.no_sync``
    (a model that DDP does not wrap has nothing to skip). DeepSpeed ZeRO
    reduces in every backward pass and takes its optimizer step inside
    ``accelerator.backward`` whenever ``accelerator.sync_gradients`` is set:
    that flag is cleared for all but the last microbatch, otherwise each
    microbatch would be an optimizer step of its own.

    Args:
        accelerator: the run's ``accelerate.Accelerator``.
        model: the prepared model the backward pass goes through.
        last: whether this is the step's last microbatch.
    """
    from accelerate.utils import DistributedType

    if last:
        yield
    elif accelerator.distributed_type == DistributedType.DEEPSPEED:
        accelerator.sync_gradients = False
        try:
            yield
        finally:
            accelerator.sync_gradients = True
    else:
        with accelerator.no_sync(model):
            yield


def gather_lists(items: list[Any], num_processes: int) -> list[Any]:
    """Every process's ``items``, concatenated in rank order, on every process.

    Collective: under several processes every one must call it, in the same
    order; with one process ``items`` comes back as it is. The items are
    pickled (``torch.distributed.all_gather_object``): keep them small
    (numbers, metric values, episode records), never tensors of a model.
    """
    if num_processes == 1:
        return items
    import torch

    gathered: list[Any] = [None] * num_processes
    torch.distributed.all_gather_object(gathered, items)
    return [item for part in gathered for item in part]


def progress_bar(items: range, *, initial: int, total: int, enabled: bool) -> Iterable[int]:
    """``items``, behind a tqdm bar when ``enabled`` and in a terminal."""
    if not enabled or not in_terminal():
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the train extra
        return items
    bar: Iterable[int] = tqdm(items, initial=initial, total=total, desc="iterations", unit="it")
    return bar


class TrainingRun(abc.ABC):
    """The iteration loop of a local trainer; a subclass fills in the steps.

    A subclass sets, in its ``__init__``: :attr:`config` (with the fields of
    :class:`LoopSettings`), :attr:`run_dir` (started with
    :meth:`RunDirectory.start`) and :attr:`start_iteration` (0, or the resumed
    checkpoint's iterations).
    """

    config: Any
    run_dir: RunDirectory
    start_iteration: int = 0
    accelerator: Any = None
    """An ``accelerate.Accelerator`` whose trackers get every metrics line (None: no trackers)."""

    # ------------------------------------------------------------- the steps

    @abc.abstractmethod
    def train_iteration(self, iteration: int) -> dict[str, Any]:
        """Sample and optimize once; return the iteration's metrics (with ``time/...``)."""

    @abc.abstractmethod
    def evaluate(self, iteration: int | None = None) -> dict[str, float]:
        """Evaluate the current weights; ``eval/...`` metrics (``{}`` when nothing to do)."""

    @abc.abstractmethod
    def save_checkpoint(self, iteration: int) -> None:
        """Save everything needed to resume after ``iteration`` completed iterations."""

    @abc.abstractmethod
    def save_final_model(self) -> None:
        """Save the trained model(s) under ``run_dir.final_model_dir``."""

    def can_evaluate(self) -> bool:
        """Whether there is anything to evaluate on (e.g. held-out problems)."""
        return True

    def progress_postfix(self, metrics: Mapping[str, Any]) -> dict[str, str]:
        """What the progress bar (or line) shows after an iteration."""
        return {}

    def finish(self) -> None:
        """Called last, on every process (e.g. to wait for the others)."""
        return None

    # --------------------------------------------------------------- the loop

    def log(self, metrics: Mapping[str, Any]) -> None:
        """Append a line to ``metrics.jsonl`` and send its numbers to the trackers (if any)."""
        self.run_dir.log(metrics)
        if self.accelerator is not None and self.accelerator.trackers:
            self.accelerator.log(numeric_metrics(metrics), step=int(metrics["iteration"]))

    def start_trackers(self) -> None:
        """Start the accelerator's trackers with the config as hyperparameters (main process)."""
        if self.accelerator is not None and self.accelerator.log_with:
            self.accelerator.init_trackers(self.config.project, config=tracker_config(self.config))

    def finish_trackers(self) -> None:
        """Close the trackers (flush TensorBoard's files, end the W&B run)."""
        if self.accelerator is None:
            return
        for tracker in self.accelerator.trackers:
            tracker.finish()
        self.accelerator.trackers = []

    def eval_due(self, iteration: int) -> bool:
        """Whether to evaluate before training ``iteration`` (and at the end)."""
        every = self.config.eval_every
        return every > 0 and iteration % every == 0 and self.can_evaluate()

    def checkpoint_due(self, done: int) -> bool:
        """Whether to save a checkpoint after ``done`` completed iterations."""
        every = self.config.save_every
        return done == self.config.num_iterations or bool(every and done % every == 0)

    def iterate(self, iteration: int) -> dict[str, Any]:
        """One iteration: evaluate when due, then train; return its metrics line."""
        start = time.perf_counter()
        metrics: dict[str, Any] = {"iteration": iteration}
        if self.eval_due(iteration):
            with phase("evaluation"):
                metrics.update(self.evaluate(iteration))
            metrics["time/eval"] = time.perf_counter() - start
        metrics.update(self.train_iteration(iteration))
        metrics["time/iteration"] = time.perf_counter() - start
        metrics["progress/done_frac"] = (iteration + 1) / self.config.num_iterations
        return metrics

    def run(self) -> Path:
        """Train from the start or the last checkpoint to ``num_iterations``; return the metrics."""
        total = self.config.num_iterations
        bar = progress_bar(
            range(self.start_iteration, total),
            initial=self.start_iteration,
            total=total,
            enabled=self.config.progress and self.run_dir.writer,
        )
        talk = self.config.progress and self.run_dir.writer
        self.start_trackers()
        sized = False
        saving: float | None = None  # seconds of the last save, logged in the next line
        for iteration in bar:
            with phase(f"iteration {iteration + 1}/{total}"):
                metrics = self.iterate(iteration)
            if saving is not None:
                metrics["time/checkpoint"], saving = saving, None
            self.log(metrics)  # log, then save (see the module docstring)
            if talk and iteration == self.start_iteration:
                warning = nothing_to_learn(metrics)
                if warning:
                    say(warning)
            if self.checkpoint_due(iteration + 1):
                start = time.perf_counter()
                with phase("save checkpoint"):
                    self.save_checkpoint(iteration + 1)
                saving = time.perf_counter() - start
                if talk and not sized:  # say once what a checkpoint costs on disk
                    sized = True
                    checkpoint = latest_checkpoint(self.run_dir.path)
                    if checkpoint is not None:
                        say(
                            f"{describe_checkpoint(checkpoint)}; keeping the newest "
                            f"{self.config.keep_checkpoints} (--keep-checkpoints)"
                        )
            postfix = self.progress_postfix(metrics)
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(postfix)
            elif talk:
                line = f"iteration {iteration + 1}/{total}"
                if postfix:
                    line += ": " + ", ".join(f"{k} {v}" for k, v in postfix.items())
                say(f"{line} ({metrics.get('time/iteration', 0.0):.0f} s)")
        if self.config.eval_every > 0 and self.can_evaluate():
            start = time.perf_counter()
            with phase("final evaluation"):
                final = self.evaluate(total)
            final["time/eval"] = time.perf_counter() - start
            if saving is not None:
                final["time/checkpoint"] = saving
            self.log({"iteration": total, **final})
            if talk and not in_terminal():
                say(f"final evaluation: {len(final)} metrics logged")
        self.finish_trackers()
        with phase("save final model"):
            self.save_final_model()
        self.finish()
        return self.run_dir.metrics_path


@contextlib.contextmanager
def setup_errors_exit(prog: str) -> Iterator[None]:
    """End the program with the message of a setup mistake, as a bad flag does (exit status 2).

    Catches ``ValueError``, ``TypeError``, ``OSError`` (a missing model
    folder, an output folder that cannot be made, an unknown environment
    argument, a value out of range) and ``ImportError`` (a setting whose
    package is not installed: ``--lora-r`` without peft) raised in the block;
    ``LLM_ENVS_TRACEBACK=1`` lets them through with their traceback.
    """
    try:
        yield
    except (ValueError, TypeError, OSError, ImportError) as exc:
        if os.environ.get("LLM_ENVS_TRACEBACK"):
            raise
        print(f"{prog}: error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is, like Ctrl-C's ``KeyboardInterrupt``."""


@contextlib.contextmanager
def interrupts_end_cleanly(
    prog: str, output_dir: Path, argv: Sequence[str] | None
) -> Iterator[None]:
    """Ctrl-C or SIGTERM ends the run with one line that says how to go on, not a traceback.

    Every file of a run is written whole or not at all (renamed into place; a
    torn last metrics line is dropped when the run starts again), so stopping
    anywhere loses at most the iteration in progress. The line names the last
    checkpoint and the command that resumes from it; the exit status is 130
    (Ctrl-C) or 143 (SIGTERM), as a shell reports them. ``argv`` is the
    command line the run was given (None: ``sys.argv[1:]``).
    """
    again = f"{prog} {shlex.join(sys.argv[1:] if argv is None else list(argv))}".strip()

    def terminate(signum: int, frame: Any) -> None:
        raise _Terminated

    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        yield
    except KeyboardInterrupt as exc:
        checkpoint = latest_checkpoint(output_dir)
        if checkpoint is None:
            where = "no checkpoint yet; the same command starts the run again"
        else:
            done = checkpoint_iteration(checkpoint)
            where = f"the last checkpoint is {checkpoint} ({done} iterations done)"
        print(
            f"{prog}: stopped: {where}; to resume, run the same command: {again}",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(143 if isinstance(exc, _Terminated) else 130) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def console(output_dir: str | Path, *, progress: bool = True) -> Iterator[None]:
    """What a run shows while the block runs: its own progress, not other libraries' noise.

    A heartbeat line whenever 30 s pass in silence (:func:`baselines.progress.heartbeat`;
    ``progress=False`` and the launched processes other than the first print
    none), and other libraries' log lines and warnings in
    ``OUTPUT_DIR/libraries.log`` (:mod:`baselines.library_logs`). The command
    lines and the trainers' ``train`` functions run in it.
    """
    main_process = os.environ.get("RANK", "0") == "0"  # accelerate launch sets RANK
    with (
        heartbeat(enabled=progress and main_process),
        library_logs_to(Path(output_dir) / LIBRARY_LOG),
    ):
        yield


def nothing_to_learn(metrics: Mapping[str, Any]) -> str | None:
    """A warning when no group of an iteration had rewards that differ: nothing to learn from it.

    Read from ``data/num_groups`` and ``data/num_groups_with_signal``
    (:func:`~baselines.data.assemble_training_data`); None when some group
    differs, or when the trainer does not log them.

    Example:
        >>> nothing_to_learn({"data/num_groups": 12, "data/num_groups_with_signal": 3}) is None
        True
    """
    groups = metrics.get("data/num_groups")
    if not groups or metrics.get("data/num_groups_with_signal", 1) > 0:
        return None
    return (
        f"nothing to learn in this iteration: in each of its {groups:g} groups every episode was "
        "paid the same, so every advantage is 0. If later iterations say so too, the policy "
        "cannot tell better from worse: try a warm start (--warm-start-steps), bigger groups, "
        "or reward shaping (docs/trainer.md)"
    )


def train_with(trainer_type: Callable[[ConfigT], TrainingRun], config: ConfigT) -> Path:
    """Set a trainer up and run it in :func:`console`; return the path of ``metrics.jsonl``.

    What each trainer's ``train(config)`` does.
    """
    with console(config.output_dir, progress=config.progress):
        with phase("set up"):
            trainer = trainer_type(config)
        return trainer.run()


def command_line(
    config_type: type[ConfigT],
    trainer_type: Callable[[ConfigT], TrainingRun],
    argv: Sequence[str] | None,
    *,
    prog: str,
) -> Path:
    """Parse ``argv`` into ``config_type``, set the trainer up, run it, say where the metrics went.

    A mistake found while setting up (a missing model folder, an unknown
    environment argument, a value out of range) ends the program with its
    message and exit status 2, as a bad flag does, instead of a traceback;
    ``LLM_ENVS_TRACEBACK=1`` shows the traceback too. Errors while training
    are not caught. Under ``accelerate launch`` the processes leave their
    group once the run is over: left to the interpreter's exit, its teardown
    can race with DeepSpeed's and abort a process that had finished.
    """
    config = parse_config(config_type, argv, prog=prog)
    with console(config.output_dir, progress=config.progress):
        with setup_errors_exit(prog), phase("set up"):
            trainer = trainer_type(config)
        with interrupts_end_cleanly(prog, trainer.run_dir.path, argv):
            path = trainer.run()
    if trainer.accelerator is not None:
        trainer.accelerator.end_training()
    if trainer.accelerator is None or trainer.accelerator.is_main_process:
        print(finish_run(trainer.run_dir.path, prog), flush=True)
    return path


def finish_run(run_dir: Path, prog: str) -> str:
    """Write the run's report and return its summary: what moved, the report, what next, the disk.

    A report that cannot be written (a run that logged nothing) is said in
    the summary, never raised: the run itself is done and saved.
    """
    from baselines.report import write_report
    from baselines.report.summary import run_summary

    report: Path | None = None
    problem = None
    try:
        report = write_report(run_dir)
    except (OSError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    return run_summary(run_dir, trainer=prog, report=report, report_error=problem)
