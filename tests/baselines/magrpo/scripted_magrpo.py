"""``python -m baselines.magrpo`` with scripted completions, for the multi-process tests.

    python tests/baselines/magrpo/scripted_magrpo.py --model tiny --device cpu ...
    accelerate launch ... tests/baselines/accelerate_on_cpu.py SCRIPT --model tiny ...

The trainer is built from the command line as ``baselines.magrpo`` builds it
(its models, its samplers, its processes), on the first problems of
CoopHumanEval (``--task-kwargs '{"num_problems": 4}'`` unless the command line
gives task settings), then each agent's sampler is wrapped: its completion ``g`` at a
node is ``TEXTS[agent][g]``, whatever the model would write. So

* the data do not depend on how the problems are split between processes
  (a random tiny model's samples would: they depend on the batch each process
  samples), and a run on several processes must give the gradient norms of
  one process;
* the rewards differ within a node (the helper's first completion defines
  ``aux``, its second does not), so every agent has advantages to learn from;
* each completion's sampling logprobs are scored by the sampler's own model
  (the trained model, or under FSDP its refreshed copy): the trainer's
  ``sample_train_logprob_diff`` stays near 0 only if that model has the
  trained weights.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

TEXTS = {
    "helper": ("def aux(x):\n    return x", "pass"),
    "main": ("pass", "pass\n"),
}
"""Each agent's completion at each index of its node's group (G = 2)."""


class ScriptedCompletions:
    """A policy whose request ``i`` of a call gets ``texts[i % G]``, scored by ``policy``'s model.

    The trees ask each agent for G completions of a node in a row, so
    ``i % G`` is the completion's index in its group.
    """

    def __init__(self, policy: Any, texts: Sequence[str]) -> None:
        from baselines.training.lora import AdapterPolicy

        self.adapter = policy if isinstance(policy, AdapterPolicy) else None
        self.policy = policy.policy if self.adapter is not None else policy
        self.texts = tuple(texts)

    def sample(self, requests: Sequence[Any], params: Any) -> list[Any]:
        import torch

        from baselines.samplers.base import Completion

        if self.adapter is not None:
            self.adapter.model.set_adapter(self.adapter.adapter)
        model, tokenizer = self.policy.model, self.policy.tokenizer
        completions = []
        for i, request in enumerate(requests):
            text = self.texts[i % len(self.texts)]
            prompt = tuple(self.policy.renderer(request.messages))
            tokens = tuple(tokenizer.encode(text, add_special_tokens=False))
            ids = torch.tensor([prompt + tokens], device=next(model.parameters()).device)
            with torch.no_grad():
                logits = model(input_ids=ids, use_cache=False).logits[0].float()
            logprobs_T = (logits[len(prompt) - 1 : -1] / params.temperature).log_softmax(-1)
            picked = logprobs_T.gather(-1, ids[0, len(prompt) :, None].to(logits.device))
            completions.append(
                Completion(prompt, tokens, tuple(picked[:, 0].tolist()), text, "eos")
            )
        return completions


def main(argv: Sequence[str]) -> None:
    from baselines.cli import parse_config
    from baselines.magrpo.trainer import MAGRPOConfig, MAGRPOTrainer
    from baselines.training.run import setup_errors_exit

    prog = "scripted_magrpo.py"
    argv = list(argv)
    if "--task-kwargs" not in argv:
        argv += ["--task-kwargs", '{"num_problems": 4}']
    config = parse_config(MAGRPOConfig, argv, prog=prog)
    with setup_errors_exit(prog):
        trainer = MAGRPOTrainer(config)
    samplers = trainer.samplers
    trainer.samplers = {a: ScriptedCompletions(policy, TEXTS[a]) for a, policy in samplers.items()}
    print(f"metrics written to {trainer.run()}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
