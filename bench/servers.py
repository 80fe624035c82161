"""Sampling throughput on vLLM servers: one server vs two, the same requests.

Run from the repository root::

    python bench/servers.py                                   # SmolLM2-135M-Instruct
    python bench/servers.py --model tiny --requests 8 --max-tokens 16   # a quick check

It starts ``vllm serve`` on loopback, samples ``--requests`` chat requests
through :class:`~baselines.samplers.OpenAIPolicy` (token prompts, token ids and
logprobs back, as the trainer samples), stops the server, then does the same
with two servers behind a :class:`~baselines.samplers.server_pool.ServerPool`.
Both setups get the same requests, seeds and number of requests in flight
(``--concurrency``), and the same CPU cores: the single server is bound to all
of ``--cores``, each of the two to one half (``VLLM_CPU_OMP_THREADS_BIND``).
Server start-up and a warm-up request per server are not timed.

``--one URL --two URL,URL`` measures servers you started yourself instead
(on GPUs, say); nothing is started then.

It prints completion tokens per second and requests per second of each setup,
and last the ratio two / one. Not a test: numbers depend on the machine; a
long run with SmolLM2 takes minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from transformers import AutoTokenizer

from baselines.models import resolve_model
from baselines.samplers import OpenAIPolicy, Policy, SampleRequest, SamplingParams
from baselines.samplers.server_pool import ServerPool, split_urls


def requests_of(count: int) -> list[SampleRequest]:
    """Short arithmetic questions, different from one another (no shared prefix cache)."""
    return [
        SampleRequest([{"role": "user", "content": f"What is {17 + i} * {23 + 2 * i}? Explain."}])
        for i in range(count)
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(model: str, cores: str, dtype: str, kv_cache_gib: float, log: Path) -> Iterator[str]:
    """``vllm serve`` of ``model`` bound to ``cores``; yields its ``/v1`` URL, stops it after."""
    port = free_port()
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", model, "--served-model-name", "bench",
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", dtype, "--max-model-len", "2048", "--enforce-eager",
        "--kv-cache-memory-bytes", str(int(kv_cache_gib * (1 << 30))),
    ]  # fmt: skip
    env = {
        **os.environ,
        "VLLM_CPU_OMP_THREADS_BIND": cores,
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    }
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"vllm serve exited:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(url + "/health", timeout=2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"vllm serve did not start in 600 s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield url + "/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def measure(
    urls: Sequence[str],
    tokenizer: object,
    requests: list[SampleRequest],
    params: SamplingParams,
    concurrency: int,
    routing: str,
) -> tuple[float, int, list[int]]:
    """Seconds and completion tokens of sampling ``requests``, and requests per server."""
    share = max(1, concurrency // len(urls))
    members = [
        OpenAIPolicy(u, "bench", tokenizer=tokenizer, max_concurrency=share, api_key_env=None)
        for u in urls
    ]
    policy: Policy = (
        members[0]
        if len(members) == 1
        else ServerPool(members, routing, max_concurrency=concurrency)  # type: ignore[arg-type]
    )
    for member in members:  # warm-up, not timed
        member.sample(requests[:1], SamplingParams(max_tokens=4, seed=0))
    start = time.perf_counter()
    completions = policy.sample(requests, params)
    seconds = time.perf_counter() - start
    served = policy.served if isinstance(policy, ServerPool) else [len(requests)]
    return seconds, sum(len(c.tokens) for c in completions), served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight, in all")
    parser.add_argument("--routing", default="round_robin", choices=["round_robin", "least_loaded"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--kv-cache-gib", type=float, default=0.5, help="per server")
    cores = sorted(os.sched_getaffinity(0))
    parser.add_argument("--cores", default=",".join(map(str, cores)), help="CPU ids to split")
    parser.add_argument("--one", help="the /v1 URL of a server you started (nothing is started)")
    parser.add_argument("--two", help="two /v1 URLs separated by a comma (with --one)")
    args = parser.parse_args()
    if (args.one is None) != (args.two is None):
        parser.error("--one and --two go together: give both, or neither to start servers here")

    path = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    requests = requests_of(args.requests)
    params = SamplingParams(max_tokens=args.max_tokens, seed=0)
    ids = [c.strip() for c in args.cores.split(",") if c.strip()]
    if args.one is None and len(ids) < 2:
        parser.error(f"two servers need two cores at least, got --cores {args.cores!r}")
    halves = [",".join(ids[: len(ids) // 2]), ",".join(ids[len(ids) // 2 :])]
    print(
        f"{args.model}: {args.requests} requests x {args.max_tokens} tokens, "
        f"{args.concurrency} in flight, {args.dtype}, routing {args.routing}"
    )
    print(f"{'setup':<34} {'tokens':>7} {'seconds':>8} {'tokens/s':>9} {'requests/s':>10}  served")
    rates = []
    for count in (1, 2):
        with tempfile.TemporaryDirectory() as logs, contextlib.ExitStack() as stack:
            if args.one is not None:
                urls = split_urls(args.one if count == 1 else args.two)
                label = f"{count} server(s) given"
            else:
                bind = [",".join(ids)] if count == 1 else halves
                urls = [
                    stack.enter_context(
                        serve(path, b, args.dtype, args.kv_cache_gib, Path(logs) / f"s{i}.log")
                    )
                    for i, b in enumerate(bind)
                ]
                label = f"{count} server(s), cores " + " | ".join(bind)
            seconds, tokens, served = measure(
                urls, tokenizer, requests, params, args.concurrency, args.routing
            )
        rates.append(tokens / seconds)
        print(
            f"{label:<34} {tokens:>7} {seconds:>8.2f} {tokens / seconds:>9.1f} "
            f"{args.requests / seconds:>10.2f}  {served}",
            flush=True,
        )
    print(f"two servers / one server, completion tokens/s: {rates[1] / rates[0]:.2f}x")


if __name__ == "__main__":
    main()
