"""How MAGRPO's agents train in one process or in several (``accelerate launch``).

    accelerate launch --config_file configs/accelerate/ddp.yaml -m baselines.magrpo ...
    accelerate launch --config_file configs/accelerate/fsdp.yaml -m baselines.magrpo ...
    accelerate launch --config_file configs/accelerate/deepspeed_zero2.yaml -m baselines.magrpo ...

Every process grows the trees of its share of the iteration's problems
(problem ``k`` of the iteration goes to process ``k mod P``) and of the
held-out problems, and computes their credit: a tree's advantages need
nothing from the other trees. For each agent, a process's loss is its
completions' part of the batch loss, ``-(1/C) * sum A * lp`` over its own
completions with ``C`` counted over every process, times ``P``; gradients
are averaged across processes, so each agent's optimizer step is the one a
single process takes on all the trees (the same gradient norm, up to float
rounding). Metrics and transcripts are gathered and written by the main
process alone.

What the processes share depends on the ``accelerate`` config
(:data:`ProcessLayout`):

==============  ==============================================================
``single``      one process (``python -m baselines.magrpo``): plain torch
                models, nothing shared.
``replicated``  a DDP config (``MULTI_GPU``; ``MULTI_CPU`` on CPUs): every
                process holds each agent's whole model (or, with LoRA, the
                shared base and every adapter). They start from the main
                process's weights (broadcast once, as DDP does), and after
                an agent's backward passes its gradients are averaged with
                one all-reduce per bucket, before clipping. DDP's own
                wrapper is not used: the agents' adapters share one base
                model and are trained one after the other, which its hooks
                (one set of trainable parameters, fixed when wrapping) do
                not allow, and a process with fewer microbatches would have
                to run empty ones to match the others' hooks.
``sharded``     an FSDP config: each agent's model and optimizer are
                prepared by ``accelerate`` (FSDP2: parameters, gradients and
                optimizer state sharded). Every process runs as many
                forward/backward passes per agent as the busiest one (empty
                ones where it has fewer), one row per prompt + completion
                (``share_prompts`` would make the passes differ between
                processes). Each agent samples with a whole copy of its
                model, refreshed from the gathered shards after its
                optimizer step; checkpoints are ``accelerate``'s sharded
                states, the final models are gathered and saved whole. LoRA
                is not supported here (the agents' adapters share one base
                model, which FSDP2 would prepare once with one optimizer).
``deepspeed``   a DeepSpeed config (ZeRO-2 or ZeRO-3): each agent's model
                and optimizer become a DeepSpeed engine of their own
                (``accelerate`` prepares them in agent order and saves and
                loads every engine in its checkpoints). ``accelerate``'s
                ``backward`` drives only the first engine it prepared, so
                each agent's backward passes and step go through its own
                engine (:meth:`AgentProcesses.backward`): DeepSpeed reduces
                gradients in every backward pass and clips (to
                ``max_grad_norm``) and steps in the last one. Passes run in
                lockstep as under FSDP. Under ZeRO-2 every process holds
                whole parameters and samples with the trained model; under
                ZeRO-3 each agent samples with a whole copy, refreshed from
                the consolidated weights after its step. LoRA is not
                supported (one base model would be two engines).
==============  ==============================================================
"""

from __future__ import annotations

import contextlib
import copy
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import torch

from baselines.training.checkpoints import DropMessages
from baselines.training.run import gather_lists
from baselines.training.weights import is_sharded

__all__ = ["AgentProcesses", "ProcessLayout", "checkpoint_kind", "process_layout"]

ProcessLayout = Literal["single", "replicated", "sharded", "deepspeed"]
"""How the agents' weights are held across processes (see the module docstring)."""

T = TypeVar("T")

_BUCKET_ELEMENTS = 1 << 24
"""Gradient elements per all-reduce (64 MiB in fp32): few calls, a bounded extra copy."""


def process_layout(accelerator: Any) -> ProcessLayout:
    """The layout of the launched processes, from ``accelerator.distributed_type``.

    Raises:
        ValueError: a backend MAGRPO does not run under (Megatron-LM, XLA, ...).
    """
    from accelerate.utils import DistributedType  # type: ignore[import-untyped]

    kind = accelerator.distributed_type
    if kind == DistributedType.FSDP:
        return "sharded"
    if kind == DistributedType.DEEPSPEED:
        return "deepspeed"
    if kind == DistributedType.NO:
        return "single"
    if str(kind).split(".")[-1].startswith("MULTI_"):
        return "replicated"
    raise ValueError(
        f"MAGRPO does not run under accelerate's {kind}; launch with "
        "configs/accelerate/ddp.yaml, fsdp.yaml or deepspeed_zero2.yaml, or as one process"
    )


class AgentProcesses:
    """This process's place among the trainer's processes, and what it does with the others.

    Args:
        accelerator: the run's ``accelerate.Accelerator``.
        lora: whether the agents train LoRA adapters on one shared base model.

    Raises:
        ValueError: a layout MAGRPO cannot train in (:func:`process_layout`), or
            LoRA under FSDP or DeepSpeed.
    """

    def __init__(self, accelerator: Any, *, lora: bool) -> None:
        self.accelerator = accelerator
        self.layout = process_layout(accelerator)
        self.rank: int = accelerator.process_index
        self.world: int = accelerator.num_processes
        self.device: torch.device = accelerator.device
        if self.layout == "sharded" and lora:
            raise ValueError(
                "lora_r > 0 under FSDP: the agents' adapters share one base model, which "
                "accelerate's FSDP2 prepares once, with one optimizer; launch with "
                "configs/accelerate/ddp.yaml (adapters are small: every process holds them all)"
            )
        if self.layout == "deepspeed" and lora:
            raise ValueError(
                "lora_r > 0 under DeepSpeed: the agents' adapters share one base model, which "
                "cannot be two DeepSpeed engines; launch with configs/accelerate/ddp.yaml "
                "(adapters are small: every process holds them all)"
            )
        self._whole_copies = self.layout == "sharded" or (
            self.layout == "deepspeed" and is_sharded(accelerator)
        )

    @property
    def lockstep(self) -> bool:
        """Whether every process must run the same forward and backward passes (FSDP, DeepSpeed).

        Their passes gather parameters or reduce gradients with the other
        processes: a process with fewer microbatches runs empty ones, and
        ``share_prompts`` (which changes the passes) is off.
        """
        return self.layout in ("sharded", "deepspeed")

    @property
    def whole_copies(self) -> bool:
        """Whether each agent samples with a whole copy of its model (FSDP, ZeRO-3).

        The trained parameters are in pieces across the processes; the copy is
        refreshed from the gathered weights after each of the agent's steps.
        """
        return self._whole_copies

    @property
    def accelerate_checkpoints(self) -> bool:
        """Whether checkpoints are ``accelerate``'s states (FSDP, DeepSpeed), not agent folders."""
        return self.layout in ("sharded", "deepspeed")

    @property
    def writer(self) -> bool:
        """Whether this process writes the run's files (the main process)."""
        return bool(self.accelerator.is_main_process)

    @property
    def seed_key(self) -> tuple[int, ...]:
        """What sets the sampling seeds of this process apart: ``()`` alone, else ``(rank,)``."""
        return () if self.world == 1 else (self.rank,)

    def check_share(self, problems_per_iteration: int) -> None:
        """Warn when some processes would have no problem to play in an iteration."""
        if 0 < problems_per_iteration < self.world and self.writer:
            warnings.warn(
                f"problems_per_iteration={problems_per_iteration} leaves "
                f"{self.world - problems_per_iteration} of {self.world} processes without a "
                "tree each iteration; raise it to a multiple of the process count",
                stacklevel=3,
            )

    def check_checkpoint(self, checkpoint: Path) -> None:
        """Refuse a checkpoint written under another layout than this run's.

        FSDP and DeepSpeed checkpoints are ``accelerate``'s states, each in its
        own form; the others hold a folder per agent (see
        ``MAGRPOTrainer.save_checkpoint``).
        """
        written = checkpoint_kind(checkpoint)
        wanted = {"sharded": "fsdp", "deepspeed": "deepspeed"}.get(self.layout, "folders")
        if written == wanted:
            return
        how = {
            "folders": "as it was started (one process, or configs/accelerate/ddp.yaml)",
            "fsdp": "under accelerate launch with configs/accelerate/fsdp.yaml",
            "deepspeed": "under accelerate launch with the DeepSpeed config it was started with",
        }[written]
        what = {
            "folders": "a folder per agent, from a run without FSDP or DeepSpeed",
            "fsdp": "the sharded state of an FSDP run",
            "deepspeed": "the engines' state of a DeepSpeed run",
        }[written]
        raise ValueError(f"{checkpoint} holds {what}; resume it {how}, or give a new output_dir")

    # ------------------------------------------------------------ collectives

    def share(self, items: Sequence[T]) -> list[tuple[int, T]]:
        """This process's items (every ``world``-th from its rank), each with its index."""
        return list(enumerate(items))[self.rank :: self.world]

    def gather(self, items: list[Any]) -> list[Any]:
        """Every process's list, concatenated in rank order, on every process (collective)."""
        return gather_lists(items, self.world)

    def sum(self, values: Sequence[float]) -> list[float]:
        """Each value summed over the processes, on every process (collective)."""
        if self.world == 1:
            return [float(v) for v in values]
        total = torch.tensor(list(values), dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(total)
        return [float(v) for v in total.tolist()]

    def most(self, value: int) -> int:
        """The largest ``value`` of any process, on every process (collective)."""
        if self.world == 1:
            return value
        most = torch.tensor([value], dtype=torch.int64, device=self.device)
        torch.distributed.all_reduce(most, op=torch.distributed.ReduceOp.MAX)
        return int(most.item())

    # ----------------------------------------------------------------- models

    def sampling_model(self, model: Any) -> Any:
        """The model an agent samples with: its trained model, or a frozen whole copy."""
        if not self.whole_copies:
            return model
        twin = copy.deepcopy(model)
        twin.requires_grad_(False)
        return twin

    def prepare(
        self, models: Mapping[str, Any], optimizers: Mapping[str, torch.optim.Optimizer]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Each agent's model and optimizer, ready for the layout (in agent order).

        ``replicated``: every process takes the main process's trainable
        weights. ``sharded`` and ``deepspeed``: ``accelerate`` prepares each
        agent's pair in turn (its checkpoints number them in this order);
        under DeepSpeed each pair becomes an engine and its optimizer, whose
        ``step`` and ``zero_grad`` do nothing (the engine steps).
        """
        if self.layout == "replicated":
            seen: set[int] = set()
            for optimizer in optimizers.values():
                parameters = [p for g in optimizer.param_groups for p in g["params"]]
                if id(parameters[0]) not in seen:  # shared base: each adapter once
                    seen.add(id(parameters[0]))
                    self._broadcast([p.data for p in parameters])
        if not self.accelerate_checkpoints:
            return dict(models), dict(optimizers)
        prepared_models, prepared_optimizers = {}, {}
        with _quiet_second_engines():
            for agent, model in models.items():
                prepared_models[agent], prepared_optimizers[agent] = self.accelerator.prepare(
                    model, optimizers[agent]
                )
        return prepared_models, prepared_optimizers

    def microbatches(self, count: int) -> int:
        """Forward/backward passes for an agent's step: in lockstep, the most of any process."""
        return self.most(count) if self.lockstep else count

    def backward(self, model: Any, loss: torch.Tensor, *, last: bool) -> None:
        """One microbatch's backward pass through ``model``; ``last``: the step's last one.

        Call it inside :func:`baselines.training.run.accumulating`. Under
        DeepSpeed the pass goes through the agent's own engine, which also
        clips, steps and zeroes the gradients after the last one.
        """
        if self.layout != "deepspeed":
            self.accelerator.backward(loss)
            return
        model.set_gradient_accumulation_boundary(is_boundary=last)
        model.backward(loss)
        if last:
            model.step()

    def empty_backward(self, model: Any, pad_token_id: int, *, last: bool) -> None:
        """A pass that adds nothing to the gradients, for a process with fewer microbatches.

        Under FSDP and DeepSpeed every forward or backward pass gathers
        parameters or reduces gradients with the other processes, so every
        process must run as many.
        """
        ids = torch.full((1, 2), pad_token_id, device=self.device)
        logits = model(input_ids=ids, use_cache=False).logits
        self.backward(model, logits.sum() * 0.0, last=last)

    def average_gradients(self, parameters: Sequence[torch.nn.Parameter]) -> None:
        """Replicated: each parameter's gradient averaged over the processes, in place.

        A parameter with a gradient on some process gets one on every process
        (zeros where it had none); one with none anywhere keeps None, so the
        optimizer skips it as a single process would. Other layouts: nothing
        to do (one process; FSDP reduced the gradients in the backward pass).
        """
        if self.layout != "replicated":
            return
        present = torch.tensor(
            [p.grad is not None for p in parameters], dtype=torch.int32, device=self.device
        )
        torch.distributed.all_reduce(present, op=torch.distributed.ReduceOp.MAX)
        grads = []
        for parameter, anywhere in zip(parameters, present.tolist(), strict=True):
            if anywhere:
                if parameter.grad is None:
                    parameter.grad = torch.zeros_like(parameter)
                grads.append(parameter.grad)
        for bucket in _buckets(grads):
            flat = torch.cat([g.reshape(-1) for g in bucket])
            torch.distributed.all_reduce(flat)
            flat /= self.world
            _unflatten(flat, bucket)

    def clip_gradients(self, model: Any, max_norm: float) -> float:
        """Clip the gradients of ``model`` to ``max_norm``; return their norm before clipping.

        Under DeepSpeed the engine clipped them in its step (to the same
        ``max_grad_norm``, :func:`baselines.training.run.make_accelerator`):
        its norm is returned.
        """
        if self.layout == "deepspeed":
            return float(model.get_global_grad_norm())
        parameters = [p for p in model.parameters() if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm)
        # FSDP: a DTensor over the shards (accelerate's own clip_grad_norm_ cannot tell
        # two prepared models apart); its full value is the norm of every shard together.
        full = getattr(norm, "full_tensor", None)
        return float(full() if full is not None else norm)

    def full_weights(self, model: Any) -> dict[str, Any] | None:
        """With whole copies: the model's weights, gathered everywhere (collective); else None."""
        if not self.whole_copies:
            return None
        from baselines.training.weights import gather_full_state

        return gather_full_state(self.accelerator, model, everywhere=True)

    def _broadcast(self, tensors: Sequence[torch.Tensor]) -> None:
        """The main process's values of ``tensors`` on every process, in place."""
        for bucket in _buckets(list(tensors)):
            flat = torch.cat([t.reshape(-1) for t in bucket])
            torch.distributed.broadcast(flat, src=0)
            _unflatten(flat, bucket)


def checkpoint_kind(checkpoint: Path) -> Literal["folders", "fsdp", "deepspeed"]:
    """How a MAGRPO checkpoint was written: agent folders, FSDP shards, or DeepSpeed engines.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> checkpoint_kind(folder)
        'folders'
        >>> (folder / "pytorch_model").mkdir()  # accelerate's first DeepSpeed engine
        >>> checkpoint_kind(folder)
        'deepspeed'
    """
    if any(checkpoint.glob("pytorch_model_fsdp_*")):
        return "fsdp"
    if (checkpoint / "pytorch_model").is_dir():
        return "deepspeed"
    return "folders"


@contextlib.contextmanager
def _quiet_second_engines() -> Iterator[None]:
    """Hide ``accelerate``'s warning that its ``backward`` drives the first engine only.

    It advises a second ``Accelerator``; MAGRPO drives each agent's engine
    itself (:meth:`AgentProcesses.backward`), so the advice does not apply.
    """
    log = logging.getLogger("accelerate.accelerator")
    hide = DropMessages("A wrapped DeepSpeed engine reference is currently tied")
    log.addFilter(hide)
    try:
        yield
    finally:
        log.removeFilter(hide)


def _buckets(tensors: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """Consecutive groups of one dtype and device, of at most about ``_BUCKET_ELEMENTS``."""
    buckets: list[list[torch.Tensor]] = []
    size = 0
    for tensor in tensors:
        last = buckets[-1][-1] if buckets else None
        same = last is not None and (last.dtype, last.device) == (tensor.dtype, tensor.device)
        if not same or size + tensor.numel() > _BUCKET_ELEMENTS:
            buckets.append([])
            size = 0
        buckets[-1].append(tensor)
        size += tensor.numel()
    return buckets


def _unflatten(flat: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
    offset = 0
    with torch.no_grad():
        for tensor in tensors:
            tensor.copy_(flat[offset : offset + tensor.numel()].view_as(tensor))
            offset += tensor.numel()
