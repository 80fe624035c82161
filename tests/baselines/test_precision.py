"""The precision rules: which device and autocast a run gets, and what its engines sample in."""

from __future__ import annotations

import pytest

from baselines.precision import (
    BF16_CPU_FLAGS,
    eval_dtype,
    fastest_precision,
    resolve_device,
    sampler_dtype,
)

pytest.importorskip("torch")

AMX = frozenset({"avx512f", "amx_bf16"})
AVX512_BF16 = frozenset({"avx512f", "avx512_bf16"})
PLAIN = frozenset({"avx2", "avx512f"})


@pytest.mark.parametrize(
    ("device", "precision", "flags", "expected"),
    [
        ("cpu", "auto", AMX, (False, False)),  # auto stays fp32 on every CPU
        ("cpu", "fp32", AMX, (False, False)),
        ("cpu", "bf16", AMX, (False, True)),
        ("cpu", "bf16", AVX512_BF16, (False, True)),
        ("cuda", "auto", PLAIN, (True, True)),
        ("cuda", "bf16", PLAIN, (True, True)),
        ("cuda", "fp32", AMX, (True, False)),
    ],
)
def test_resolve_device(device, precision, flags, expected):
    assert resolve_device(device, precision, flags=flags) == expected


def test_bf16_on_a_cpu_without_bf16_arithmetic_names_the_flags_and_the_fix():
    with pytest.raises(ValueError, match="needs CUDA or a CPU with bf16 arithmetic") as error:
        resolve_device("cpu", "bf16", flags=PLAIN)
    message = str(error.value)
    assert all(flag in message for flag in BF16_CPU_FLAGS)
    assert "use precision='fp32' or 'auto'" in message


@pytest.mark.parametrize(
    ("flags", "expected"), [(AMX, "bf16"), (AVX512_BF16, "bf16"), (PLAIN, "auto")]
)
def test_fastest_precision_is_one_resolve_device_accepts(flags, expected):
    assert fastest_precision(flags) == expected
    assert resolve_device("cpu", fastest_precision(flags), flags=flags)[1] is (expected == "bf16")


@pytest.mark.parametrize(
    ("precision", "bf16", "flags", "expected"),
    [
        # fp32 training (a CPU's default): the sampler is fp32, evaluation may go bf16.
        ("auto", False, AMX, "bfloat16"),
        ("auto", False, PLAIN, "float32"),
        ("sampler", False, AMX, "float32"),
        ("bf16", False, PLAIN, "bfloat16"),
        # bf16 training: the sampler is bf16 already, so every setting is bf16.
        ("auto", True, PLAIN, "bfloat16"),
        ("sampler", True, AMX, "bfloat16"),
        ("bf16", True, AMX, "bfloat16"),
    ],
)
def test_eval_dtype(precision, bf16, flags, expected):
    assert eval_dtype(precision, bf16=bf16, flags=flags) == expected


def test_the_sampler_samples_in_the_trainers_precision():
    assert sampler_dtype(bf16=True) == "bfloat16"
    assert sampler_dtype(bf16=False) == "float32"


def test_an_unknown_eval_precision_names_the_choices():
    with pytest.raises(ValueError, match="must be 'auto', 'sampler' or 'bf16', got 'fp16'"):
        eval_dtype("fp16", bf16=False, flags=AMX)  # type: ignore[arg-type]


def test_runs_in_one_process_may_change_precision(tmp_path):
    # accelerate keeps the first Accelerator's precision for the whole process; a
    # second run in another precision (a notebook, a test session) must still start.
    from types import SimpleNamespace

    from baselines.training.run import make_accelerator

    config = SimpleNamespace(report_to="none", output_dir=str(tmp_path), project="p")
    for precision in ("no", "bf16", "no"):
        accelerator = make_accelerator(config, cuda=False, mixed_precision=precision)
        assert accelerator.mixed_precision == precision
