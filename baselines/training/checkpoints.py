"""Trainer checkpoints: save the whole training state, find the latest, resume from it.

A checkpoint is a folder ``{output_dir}/checkpoints/iteration_{k:06d}`` holding
what ``accelerate``'s ``save_state`` writes (model weights as
``model.safetensors``, optimizer state, every process's python/numpy/torch
random states; sharded the right way under FSDP or DeepSpeed), the model's
``config.json`` and tokenizer (so ``from_pretrained(folder)`` loads the
weights), and ``trainer_state.json`` with ``k``, the number of completed
iterations. Since each iteration's data is a pure function of the seed and its
index, ``k`` is the whole data position.

A checkpoint is written to ``iteration_{k:06d}.tmp`` and renamed when complete,
so a run killed while saving leaves the previous checkpoint as the latest.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

__all__ = ["latest_checkpoint", "load_checkpoint", "save_checkpoint"]

_NAME = re.compile(r"^iteration_(\d{6,})$")
_STATE_FILE = "trainer_state.json"


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The complete checkpoint with the most iterations under ``output_dir``, or None."""
    folder = Path(output_dir) / "checkpoints"
    if not folder.is_dir():
        return None
    complete = [
        (int(match.group(1)), path)
        for path in folder.iterdir()
        if (match := _NAME.match(path.name)) and (path / _STATE_FILE).is_file()
    ]
    return max(complete)[1] if complete else None


def save_checkpoint(
    accelerator: Any,
    model: Any,
    output_dir: str | Path,
    iteration: int,
    tokenizer: Any,
    *,
    keep: int = 1,
) -> Path:
    """Save the training state after ``iteration`` completed iterations; keep the newest ``keep``.

    Every process must call it (each saves its random states).
    """
    folder = Path(output_dir) / "checkpoints"
    final = folder / f"iteration_{iteration:06d}"
    tmp = final.with_name(final.name + ".tmp")
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp), safe_serialization=True)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _STATE_FILE).write_text(json.dumps({"iteration": iteration}))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        older = sorted(
            (p for p in folder.iterdir() if _NAME.match(p.name) and p != final),
            key=lambda p: p.name,
        )
        for path in older[: max(0, len(older) - (keep - 1))]:
            shutil.rmtree(path, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(accelerator: Any, checkpoint: str | Path) -> int:
    """Restore model, optimizer and random states; return the completed iterations."""
    accelerator.load_state(str(checkpoint))
    return int(json.loads((Path(checkpoint) / _STATE_FILE).read_text())["iteration"])
