"""Where a run computes and in which precision: the one rule every trainer and engine reads.

* :func:`resolve_device`: the trainer's device and whether it autocasts to bf16;
* :func:`sampler_dtype`: the training sampler's precision, the trainer's own, so that
  their logprobs agree;
* :func:`eval_dtype`: the precision of the engines that play evaluation episodes,
  which need samples and not logprobs.

bf16 pays wherever the hardware computes in it: on a GPU, and on x86 CPUs with
bf16 instructions (``avx512_bf16``, ``amx_bf16``; :func:`cpu_flags`). On such a
CPU (2 cores, SmolLM2-135M) a training forward and backward pass of 2,000
tokens takes 5.4 s under bf16 autocast against 9.7 s in fp32, and a vLLM engine
decodes about twice as fast. Weights and optimizer state stay fp32 either way.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "BF16_CPU_FLAGS",
    "EvalPrecision",
    "cpu_flags",
    "eval_dtype",
    "fastest_precision",
    "resolve_device",
    "sampler_dtype",
]

BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
"""``/proc/cpuinfo`` flags of x86 CPUs with bf16 arithmetic in hardware."""

EvalPrecision = Literal["auto", "sampler", "bf16"]
"""The evaluation engines' precision setting (:func:`eval_dtype`)."""


def cpu_flags() -> frozenset[str]:
    """This machine's CPU feature flags (Linux's ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def resolve_device(
    device: str, precision: str, *, flags: frozenset[str] | None = None
) -> tuple[bool, bool]:
    """``(cuda, bf16)`` of a run: where it trains and whether it autocasts to bf16.

    ``device="auto"`` trains on CUDA when there is one. ``precision="auto"`` is
    bf16 on CUDA and fp32 on a CPU; ``precision="bf16"`` autocasts on CUDA, and
    on a CPU only where it has bf16 arithmetic (``flags``, default
    :func:`cpu_flags`): elsewhere CPU autocast is slower than fp32 and loses
    precision for nothing. ``auto`` stays fp32 on every CPU: there the
    trainer's logprobs are the fp32 sampler's within 1e-4, which exact
    comparisons (tests, KL metrics near 0) rely on; bf16 is asked for by name.

    Raises:
        ValueError: ``precision="bf16"`` on a CPU without bf16 arithmetic.

    Example:
        >>> resolve_device("cpu", "auto"), resolve_device("cuda", "auto")
        ((False, False), (True, True))
        >>> resolve_device("cpu", "bf16", flags=frozenset({"amx_bf16"}))
        (False, True)
    """
    import torch

    cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if precision == "bf16" and not cuda:
        present = cpu_flags() if flags is None else flags
        if not present & BF16_CPU_FLAGS:
            raise ValueError(
                "precision='bf16' needs CUDA or a CPU with bf16 arithmetic "
                f"({' or '.join(sorted(BF16_CPU_FLAGS))} in /proc/cpuinfo), and this CPU has "
                "neither; use precision='fp32' or 'auto'"
            )
    return cuda, precision == "bf16" or (cuda and precision == "auto")


def fastest_precision(flags: frozenset[str] | None = None) -> str:
    """``bf16`` on a CPU with bf16 arithmetic (``flags``, default :func:`cpu_flags`), else ``auto``.

    The training precision a CPU run should ask for when speed matters more
    than logprobs equal to fp32 ones (``auto`` is bf16 on CUDA anyway).

    Example:
        >>> fastest_precision(frozenset({"amx_bf16"})), fastest_precision(frozenset({"avx2"}))
        ('bf16', 'auto')
    """
    present = cpu_flags() if flags is None else flags
    return "bf16" if present & BF16_CPU_FLAGS else "auto"


def sampler_dtype(*, bf16: bool) -> str:
    """The training sampler's precision: the trainer's (``bf16``: its autocast), so logprobs agree.

    In fp32 (a CPU's default) vLLM's logprobs are the trainer's within 1e-4
    (notes/vllm-cpu.md); under bf16 autocast the engine samples in bf16 too.
    """
    return "bfloat16" if bf16 else "float32"


def eval_dtype(precision: EvalPrecision, *, bf16: bool, flags: frozenset[str]) -> str:
    """The precision of the vLLM engines that play evaluation episodes.

    Evaluation needs samples, not logprobs: ``auto`` takes bf16 where the
    hardware has bf16 arithmetic (``bf16`` training, or a CPU whose ``flags``
    have it), where a call takes about half the time, and the sampler's
    precision elsewhere. ``sampler`` always takes the sampler's.

    Example:
        >>> bf16_cpu = frozenset({"avx512_bf16"})
        >>> [eval_dtype(p, bf16=False, flags=bf16_cpu) for p in ("auto", "sampler", "bf16")]
        ['bfloat16', 'float32', 'bfloat16']
        >>> eval_dtype("auto", bf16=False, flags=frozenset({"avx2"}))
        'float32'
        >>> eval_dtype("sampler", bf16=True, flags=frozenset())  # a bf16 sampler's own
        'bfloat16'
    """
    if precision not in ("auto", "sampler", "bf16"):
        raise ValueError(f"eval_precision must be 'auto', 'sampler' or 'bf16', got {precision!r}")
    if precision == "sampler" or (precision == "auto" and not bf16 and not flags & BF16_CPU_FLAGS):
        return sampler_dtype(bf16=bf16)
    return "bfloat16"
