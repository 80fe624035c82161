"""Trainer checkpoints: written atomically, the latest found, the training state restored.

A checkpoint is a folder ``{output_dir}/checkpoints/iteration_{k:06d}`` holding
what the trainer saves (the IS trainer: ``accelerate``'s ``save_state`` with
model weights, optimizer state and every process's random states, sharded the
right way under FSDP or DeepSpeed, plus the model's ``config.json`` and
tokenizer; MAGRPO: a folder per agent with its model, tokenizer and
``optimizer.pt``) and ``trainer_state.json`` with ``k``, the number of
completed iterations, and the trainer's own plain state, if any (the IS
trainer's role baselines; :func:`checkpoint_state`). With LoRA
(``lora_r > 0``) the model's part is the adapter alone, in PEFT's format
(``adapter/`` for the IS trainer, see :func:`save_adapters_only`; each
agent's folder for MAGRPO): the frozen base weights come from ``model`` again
on resume. Since each iteration's data is a pure function of the
seed and its index, ``k`` is the whole data position.

Every checkpoint is written by :func:`writing_checkpoint`: into
``iteration_{k:06d}.tmp``, then renamed when complete, so a run killed while
saving leaves the previous checkpoint as the latest; older ones are removed
after the rename.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from baselines.run_directory import CHECKPOINTS_DIR

__all__ = [
    "DropMessages",
    "checkpoint_iteration",
    "checkpoint_state",
    "describe_checkpoint",
    "drop_optimizer_state",
    "latest_checkpoint",
    "load_checkpoint",
    "save_adapters_only",
    "save_checkpoint",
    "writing_checkpoint",
]

_NAME = re.compile(r"^iteration_(\d{6,})$")
_STATE_FILE = "trainer_state.json"


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The complete checkpoint with the most iterations under ``output_dir``, or None."""
    folder = Path(output_dir) / CHECKPOINTS_DIR
    if not folder.is_dir():
        return None
    complete = [
        (int(match.group(1)), path)
        for path in folder.iterdir()
        if (match := _NAME.match(path.name)) and (path / _STATE_FILE).is_file()
    ]
    return max(complete)[1] if complete else None


def checkpoint_iteration(checkpoint: str | Path) -> int:
    """The completed iterations a checkpoint holds."""
    return int(json.loads((Path(checkpoint) / _STATE_FILE).read_text())["iteration"])


def checkpoint_state(checkpoint: str | Path) -> dict[str, Any]:
    """The trainer's own state a checkpoint holds (``state`` of :func:`writing_checkpoint`).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as out:
        ...     with writing_checkpoint(out, 3, state={"baseline": 0.25}):
        ...         pass
        ...     checkpoint_state(latest_checkpoint(out))
        {'baseline': 0.25}
    """
    saved = json.loads((Path(checkpoint) / _STATE_FILE).read_text())
    return {key: value for key, value in saved.items() if key != "iteration"}


@contextlib.contextmanager
def writing_checkpoint(
    output_dir: str | Path,
    iteration: int,
    *,
    keep: int = 1,
    writer: bool = True,
    barrier: Callable[[], None] = lambda: None,
    state: Mapping[str, Any] | None = None,
    older_optimizer_states: bool = False,
) -> Iterator[Path]:
    """Yield the folder to write a checkpoint into; publish it when the block ends.

    The block writes into ``iteration_{k:06d}.tmp``; on leaving it,
    ``trainer_state.json`` is added, the folder is renamed to
    ``iteration_{k:06d}``, and all but the newest ``keep`` checkpoints are
    removed. An exception in the block publishes nothing.

    Args:
        output_dir: the run's folder.
        iteration: completed iterations.
        keep: how many checkpoints to keep, this one included.
        writer: whether this process creates, renames and removes folders (the
            main process); every process may write into the yielded folder.
        barrier: waits for every process (``accelerator.wait_for_everyone``);
            called before and after the block and after publishing.
        state: the trainer's own plain state (JSON values), written into
            ``trainer_state.json`` beside the iteration; read back with
            :func:`checkpoint_state`.
        older_optimizer_states: keep the optimizer state in the older kept
            checkpoints too; by default only the newest holds it (resume reads
            the newest; the others keep their weights, a third of the size).
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1 (the checkpoint just written), got {keep}")
    if state is not None and "iteration" in state:
        raise ValueError("state must not hold 'iteration': the checkpoint writes it itself")
    final = _checkpoint_path(output_dir, iteration)
    folder, tmp = final.parent, final.with_name(final.name + ".tmp")
    if writer:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    barrier()
    yield tmp
    barrier()
    if writer:
        (tmp / _STATE_FILE).write_text(json.dumps({"iteration": iteration, **(state or {})}))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        older = sorted(p for p in folder.iterdir() if _NAME.match(p.name) and p != final)
        for path in older[: max(0, len(older) - (keep - 1))]:
            shutil.rmtree(path, ignore_errors=True)
        if not older_optimizer_states:
            for path in older[max(0, len(older) - (keep - 1)) :]:
                drop_optimizer_state(path)
    barrier()


_OPTIMIZER_FILE = re.compile(r"optimizer|optim_states")
"""What holds optimizer state in a checkpoint: ``accelerate``'s ``optimizer.bin`` (FSDP:
``optimizer_0/``), DeepSpeed's ``*_optim_states.pt``, MAGRPO's ``AGENT/optimizer.pt``."""


def drop_optimizer_state(checkpoint: str | Path) -> int:
    """Delete the optimizer state inside ``checkpoint``, keep its weights; return bytes freed."""
    freed = 0
    for path in sorted(Path(checkpoint).rglob("*"), reverse=True):  # children before parents
        if not _OPTIMIZER_FILE.search(path.name) or not path.exists():
            continue
        if path.is_dir():
            freed += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            shutil.rmtree(path)
        else:
            freed += path.stat().st_size
            path.unlink()
    return freed


def describe_checkpoint(checkpoint: str | Path) -> str:
    """``"checkpoint iteration_000002: 1.6 GB (optimizer 1.1 GB, model 0.5 GB)"``: its disk cost.

    Files are grouped by what they hold: ``optimizer`` (optimizer state, most of
    a checkpoint with AdamW), ``model`` (weights), ``other`` (random states,
    tokenizer, config).
    """
    folder = Path(checkpoint)
    parts: dict[str, int] = {"optimizer": 0, "model": 0, "other": 0}
    for path in folder.rglob("*"):
        if path.is_file():
            name = path.name.lower()
            kind = "optimizer" if "optimizer" in name else "model" if "model" in name else "other"
            parts[kind] += path.stat().st_size
    total = sum(parts.values())
    shown = ", ".join(f"{k} {_size(v)}" for k, v in parts.items() if v >= total / 20)
    return f"checkpoint {folder.name}: {_size(total)} ({shown})"


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


class DropMessages(logging.Filter):
    """A logging filter that drops the records whose message contains ``text``.

    A substring, not a prefix: ``accelerate`` may put the process in front
    of its messages (``"[RANK 0] ..."``).
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is kept: its message does not contain the text."""
        return self.text not in str(record.getMessage())


_QUIET = DropMessages("Removed shared tensor")
"""accelerate's notice that tied weights (``lm_head`` = embeddings) are saved once.

The tie is restored when the model is loaded (the tests check resumed
weights); printed at every checkpoint, the notice only breaks the progress bar.
"""


def save_checkpoint(
    accelerator: Any,
    model: Any,
    output_dir: str | Path,
    iteration: int,
    tokenizer: Any,
    *,
    keep: int = 1,
    state: Mapping[str, Any] | None = None,
    older_optimizer_states: bool = False,
) -> Path:
    """Save an ``accelerate`` training state after ``iteration`` completed iterations.

    Every process must call it (each saves its random states). ``state`` is the
    trainer's own plain state (:func:`checkpoint_state` reads it back);
    ``keep`` and ``older_optimizer_states`` are :func:`writing_checkpoint`'s.
    """
    main = bool(accelerator.is_main_process)
    logging.getLogger("accelerate.utils.other").addFilter(_QUIET)  # once: filters are a set
    with writing_checkpoint(
        output_dir,
        iteration,
        keep=keep,
        writer=main,
        barrier=accelerator.wait_for_everyone,
        state=state,
        older_optimizer_states=older_optimizer_states,
    ) as folder:
        accelerator.save_state(str(folder), safe_serialization=True)
        if main:
            accelerator.unwrap_model(model).config.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
    return _checkpoint_path(output_dir, iteration)


def load_checkpoint(accelerator: Any, checkpoint: str | Path) -> int:
    """Restore model, optimizer and random states; return the completed iterations."""
    accelerator.load_state(str(checkpoint))
    return checkpoint_iteration(checkpoint)


def save_adapters_only(accelerator: Any) -> None:
    """Make ``accelerator.save_state``/``load_state`` write and read a LoRA model's adapter only.

    ``save_state`` would write the whole ``PeftModel``, frozen base included.
    Hooks replace that: the adapter goes to ``{checkpoint}/adapter/`` in PEFT's
    format, and ``load_state`` loads it back into the model (whose base was
    loaded from ``model`` as at the start). The optimizer state (the
    adapter's) and random states are ``accelerate``'s as before. Under FSDP and
    DeepSpeed, which save sharded states of their own, nothing changes.
    """
    from baselines.training.lora import ADAPTER_DIR, is_lora, load_adapter, save_adapter

    def save(models: list[Any], weights: list[Any], output_dir: str) -> None:
        if not weights:  # FSDP or DeepSpeed saved the model their own way
            return
        for index in reversed(range(len(models))):
            model = accelerator.unwrap_model(models[index])
            if is_lora(model):
                if accelerator.is_main_process:
                    save_adapter(model, Path(output_dir) / ADAPTER_DIR)
                weights.pop(index)

    def load(models: list[Any], input_dir: str) -> None:
        for index in reversed(range(len(models))):
            model = accelerator.unwrap_model(models[index])
            if is_lora(model):
                load_adapter(model, Path(input_dir) / ADAPTER_DIR)
                models.pop(index)

    accelerator.register_save_state_pre_hook(save)
    accelerator.register_load_state_pre_hook(load)


def _checkpoint_path(output_dir: str | Path, iteration: int) -> Path:
    return Path(output_dir) / CHECKPOINTS_DIR / f"iteration_{iteration:06d}"
