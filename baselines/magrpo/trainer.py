"""MAGRPO: multi-agent GRPO on the code-collaboration env (seed 004).

    python -m baselines.magrpo --help

One model per agent (``helper`` and ``main``), each with its own AdamW
optimizer. One iteration:

1. *Roll out* one tree per problem (:func:`baselines.magrpo.tree.grow_trees`):
   at every node each agent samples G completions, joint actions are aligned
   (G) or crossed (G**N), each is stepped in a fork of the env, and children are
   expanded for ``num_turns`` turns unless the node's mean reward exceeds
   ``termination_threshold``.
2. *Credit* (:func:`baselines.magrpo.credit.tree_credit`): ``R = r + discount *
   mean(child returns)``; a completion's advantage is its return minus the mean of
   its agent's G completions at the node. No std normalization, no importance
   ratio: the update is on-policy.
3. *Update* each agent once: ``loss = -mean over its completions of (A * sum of the
   completion's token logprobs)``, the logprobs recomputed by a forward pass on
   prompt + completion (the sampled tokens, never re-tokenized), padding and
   prompt tokens excluded; gradient clipping, one optimizer step.
4. *Log* one JSON line to ``OUTPUT_DIR/metrics.jsonl`` (per-turn reward, pass rate,
   reward levels and bonus; per-agent loss and gradient norm), evaluate on
   held-out problems with near-greedy decoding when due, checkpoint. Transcripts
   (``save_episodes``) go to ``OUTPUT_DIR/episodes/``: one root-to-leaf episode
   of each of the first trees, and the evaluation episodes, for
   ``python -m baselines.report OUTPUT_DIR``.

A trainer never parses the env's text: rewards and their breakdown come from
the env's infos.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.cli import parse_config
from baselines.data.datums import pad_data, trajectory_to_data
from baselines.magrpo.config import MAGRPOConfig
from baselines.magrpo.credit import NodeCredit, iter_credit, tree_credit
from baselines.magrpo.tree import (
    TreeNode,
    credit_node,
    grow_trees,
    iter_nodes,
    path_record,
    tree_metrics,
)
from baselines.models import resolve_model
from baselines.policies.base import Completion, Policy, SamplingParams
from baselines.types import Datum, Trajectory, Transition
from llm_envs.code_collab import CodeCollabEnv, load_problems
from llm_envs.tasks import CodeProblem

__all__ = [
    "MAGRPOConfig",
    "MAGRPOTrainer",
    "completion_logprobs",
    "main",
    "policy_gradient_loss",
    "shared_prompt_logprobs",
    "train",
]


def completion_logprobs(
    model: Any,
    data_D: Sequence[Datum],
    device: torch.device,
    *,
    temperature: float = 1.0,
    pad_token_id: int = 0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Training logprobs of right-padded Datums' targets, over the columns that hold completions.

    The model projects to the vocabulary only the last ``K`` columns, from the
    earliest completion token of any row to the end (``logits_to_keep``): prompt
    tokens need no logits, and a vocabulary-sized row per prompt token is most of
    the memory of a long prompt.

    Returns:
        ``(logprobs_B_K, batch)``: the logprobs, 0 on padding, and ``batch``
        holding ``advantages``, ``weights``, ``mask``, ``sampling_logprobs`` and
        ``attention_mask`` for the same ``(B, K)`` columns.
    """
    padded = pad_data(data_D, pad_token_id=pad_token_id)
    width = padded.input_ids_B_T.shape[1]
    starts = [int(np.argmax(d.mask > 0)) if d.mask.any() else len(d) for d in data_D]
    keep = max(1, width - min(starts))
    inputs = {
        "input_ids": torch.from_numpy(padded.input_ids_B_T).to(device),
        "attention_mask": torch.from_numpy(padded.attention_mask_B_T).to(device),
        "use_cache": False,
    }
    try:
        logits = model(**inputs, logits_to_keep=keep).logits
    except TypeError:  # a model without logits_to_keep: project every column
        logits = model(**inputs).logits
    logits = logits[:, -keep:].float()
    if temperature != 1.0:
        logits = logits / temperature
    columns = slice(width - keep, width)
    targets_B_K = torch.from_numpy(padded.target_tokens_B_T[:, columns]).to(device)
    # log softmax at the target only: no second vocabulary-sized tensor.
    picked = logits.gather(-1, targets_B_K.unsqueeze(-1)).squeeze(-1)
    arrays: dict[str, np.ndarray] = {
        "advantages": padded.advantages_B_T,
        "weights": padded.weights_B_T,
        "mask": padded.mask_B_T,
        "sampling_logprobs": padded.logprobs_B_T,
        "attention_mask": padded.attention_mask_B_T,
    }
    batch = {
        k: torch.from_numpy(np.ascontiguousarray(v[:, columns])).to(device)
        for k, v in arrays.items()
    }
    logprobs_B_K = (picked - torch.logsumexp(logits, dim=-1)) * batch["attention_mask"]
    return logprobs_B_K, batch


def shared_prompt_logprobs(
    model: Any,
    prompt_tokens: Sequence[int],
    completions_K: Sequence[Sequence[int]],
    device: torch.device,
    *,
    temperature: float = 1.0,
    pad_token_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Training logprobs of K completions of one prompt, the prompt run through the model once.

    The G completions an agent samples at a tree node share their prompt, which
    is most of each sequence (the problem, and at later turns the history and
    the feedback). The prompt goes through the model once; its key/value cache
    is repeated for the K completions, which attend to it. Gradients flow
    through the cache into the prompt's forward pass, so logprobs and gradients
    are those of K separate prompt + completion rows (up to float rounding),
    for about ``P + K * C`` instead of ``K * (P + C)`` tokens.

    Args:
        model: a causal LM whose forward returns a ``past_key_values`` cache with
            ``batch_repeat_interleave`` (any Hugging Face transformers model).
        prompt_tokens: the prompt, P >= 1 tokens.
        completions_K: the completions, each of at least one token.
        device: where the model is.
        temperature: the sampling temperature; logits are divided by it.
        pad_token_id: the token that fills the rows of shorter completions.

    Returns:
        ``(logprobs_K_C, mask_K_C)``: each completion token's logprob (right
        padded to the longest, C, with 0) and 1.0 on real tokens.
    """
    if not prompt_tokens or not completions_K or not all(completions_K):
        raise ValueError("need a non-empty prompt and at least one completion, none empty")
    num, width = len(completions_K), max(len(c) for c in completions_K)
    prompt = torch.tensor([list(prompt_tokens)], device=device)
    length = prompt.shape[1]
    try:
        out = model(input_ids=prompt, use_cache=True, logits_to_keep=1)
    except TypeError:  # a model without logits_to_keep
        out = model(input_ids=prompt, use_cache=True)
    # The prompt's last position predicts every completion's first token.
    logits = out.logits[:, -1:].float().expand(num, -1, -1)
    if width > 1:
        cache = out.past_key_values
        if not hasattr(cache, "batch_repeat_interleave"):
            raise TypeError(
                f"{type(model).__name__} returns no repeatable key/value cache "
                f"({type(cache).__name__}); set share_prompts=False"
            )
        cache.batch_repeat_interleave(num)
        inputs = torch.full((num, width - 1), pad_token_id, dtype=torch.long)
        attention = torch.zeros((num, length + width - 1), dtype=torch.long)
        attention[:, :length] = 1
        for row, tokens in enumerate(completions_K):
            inputs[row, : len(tokens) - 1] = torch.tensor(list(tokens[:-1]))
            attention[row, length : length + len(tokens) - 1] = 1
        positions = torch.arange(length, length + width - 1).expand(num, -1)
        rest = model(
            input_ids=inputs.to(device),
            attention_mask=attention.to(device),
            position_ids=positions.to(device),
            past_key_values=cache,
            use_cache=True,
        ).logits.float()
        logits = torch.cat([logits, rest], dim=1)
    if temperature != 1.0:
        logits = logits / temperature
    targets_K_C = torch.zeros((num, width), dtype=torch.long)
    mask_K_C = torch.zeros((num, width))
    for row, tokens in enumerate(completions_K):
        targets_K_C[row, : len(tokens)] = torch.tensor(list(tokens))
        mask_K_C[row, : len(tokens)] = 1.0
    targets_K_C, mask_K_C = targets_K_C.to(device), mask_K_C.to(device)
    picked = logits.gather(-1, targets_K_C.unsqueeze(-1)).squeeze(-1)
    return (picked - torch.logsumexp(logits, dim=-1)) * mask_K_C, mask_K_C


def policy_gradient_loss(
    logprobs_B_T: torch.Tensor,
    advantages_B_T: torch.Tensor,
    weights_B_T: torch.Tensor,
    num_completions: int,
) -> torch.Tensor:
    """``-(1/C) * sum_c A_c * sum_t logprob_ct``: MAGRPO's on-policy loss of one agent.

    Rows are completions (prompt + completion, right-padded); ``advantages_B_T``
    holds the row's advantage on its completion tokens and 0 on prompt and padding,
    ``weights_B_T`` 1 on completion tokens. ``num_completions`` is C, every
    completion of the agent in the batch, so microbatches' losses add up to the
    batch loss.

    Example:
        >>> lp = torch.tensor([[-9.0, -1.0, -2.0], [-9.0, -0.5, 0.0]])  # prompt token first
        >>> adv = torch.tensor([[0.0, 2.0, 2.0], [0.0, -1.0, 0.0]])  # row 2 is padded
        >>> w = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
        >>> policy_gradient_loss(lp, adv, w, num_completions=2)  # -(2*(-3) + -1*(-0.5)) / 2
        tensor(2.7500)
    """
    return -(advantages_B_T * weights_B_T * logprobs_B_T).sum() / num_completions


def _microbatches(lengths_D: Sequence[int], max_tokens: int) -> list[list[int]]:
    # Padded cost: rows x longest row. Longest first, so each batch pads little.
    order = sorted(range(len(lengths_D)), key=lambda i: -lengths_D[i])
    batches: list[list[int]] = []
    for index in order:
        if batches and (len(batches[-1]) + 1) * lengths_D[batches[-1][0]] <= max_tokens:
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


def _prompt_groups(
    items: Sequence[tuple[Completion, float]], max_tokens: int
) -> Iterator[tuple[tuple[int, ...], list[tuple[Completion, float]]]]:
    # Completions of one node share their prompt; a group costs P + K * longest tokens.
    groups: dict[tuple[int, ...], list[tuple[Completion, float]]] = {}
    for completion, advantage in items:
        groups.setdefault(completion.prompt_tokens, []).append((completion, advantage))
    for prompt, members in groups.items():
        members.sort(key=lambda item: -len(item[0].tokens))
        per_chunk = max(1, (max_tokens - len(prompt)) // len(members[0][0].tokens))
        for start in range(0, len(members), per_chunk):
            yield prompt, members[start : start + per_chunk]


def _datum(completion: Completion, advantage: float) -> Datum | None:
    transition = Transition(completion.prompt_tokens, completion.tokens, completion.logprobs)
    data = trajectory_to_data(Trajectory((transition,)), advantage)
    return data[0] if data else None


class MAGRPOTrainer:
    """Set up a run (one model and optimizer per agent, samplers, resume), then :meth:`run` it.

    Args:
        config: the run's configuration.
        models: an already loaded model per agent (default: ``config.model``, one
            copy per agent); each must be its own object.
        tokenizer: the tokenizer (default: ``config.model``'s).
        samplers: a policy per agent (default: a
            :class:`~baselines.policies.TransformersPolicy` on the agent's model,
            which always samples with the current weights). A custom sampler must
            return the completion's prompt tokens as the agent's model reads them.
        problems: the problems to train and evaluate on, overriding ``config.dataset``.
    """

    def __init__(
        self,
        config: MAGRPOConfig,
        *,
        models: Mapping[str, Any] | None = None,
        tokenizer: Any | None = None,
        samplers: Mapping[str, Policy] | None = None,
        problems: Sequence[CodeProblem] | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from baselines.policies.transformers_policy import TransformersPolicy

        self.config = config
        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        torch.manual_seed(config.seed)
        cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
        self.device = torch.device("cuda" if cuda else "cpu")
        self.autocast = cuda and config.precision in ("auto", "bf16")
        if config.precision == "bf16" and not cuda:
            raise ValueError("precision='bf16' needs CUDA; use fp32 or auto on CPU")
        self.output_dir = Path(config.output_dir)

        all_problems = tuple(problems) if problems is not None else load_problems(config.dataset)
        held_out = config.eval_problems
        if held_out >= len(all_problems):
            raise ValueError(
                f"eval_problems={held_out} leaves no training problems out of {len(all_problems)}"
            )
        self.train_problems = all_problems[: len(all_problems) - held_out]
        self.eval_problems = all_problems[len(all_problems) - held_out :]
        self.agents: list[str] = list(self._make_env(self.train_problems).possible_agents)

        checkpoint = self._latest_checkpoint()
        self.start_iteration = 0
        if checkpoint is not None:
            self.start_iteration = json.loads((checkpoint / "trainer_state.json").read_text())[
                "iteration"
            ]
        if models is None:
            path = resolve_model(config.model)
            self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
            models = {
                agent: AutoModelForCausalLM.from_pretrained(
                    checkpoint / agent if checkpoint else path, dtype=torch.float32
                )
                for agent in self.agents
            }
        else:
            if tokenizer is None:
                raise ValueError("pass tokenizer= together with models=")
            self.tokenizer = tokenizer
            if checkpoint is not None:
                for agent, model in models.items():
                    model.load_state_dict(
                        AutoModelForCausalLM.from_pretrained(checkpoint / agent).state_dict()
                    )
        if sorted(models) != sorted(self.agents) or len({id(m) for m in models.values()}) != len(
            models
        ):
            raise ValueError(
                f"give one distinct model per agent {self.agents}, got {sorted(models)}"
            )
        self.models = {agent: models[agent].to(self.device) for agent in self.agents}
        for model in self.models.values():
            model.train()
        self.optimizers = {
            agent: torch.optim.AdamW(
                model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
            )
            for agent, model in self.models.items()
        }
        if checkpoint is not None:
            for agent, optimizer in self.optimizers.items():
                optimizer.load_state_dict(
                    torch.load(checkpoint / agent / "optimizer.pt", map_location=self.device)
                )
        self.samplers: dict[str, Policy] = (
            dict(samplers)
            if samplers is not None
            else {
                agent: TransformersPolicy(model, self.tokenizer)
                for agent, model in self.models.items()
            }
        )
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else 0)
        self.metrics_path = self.output_dir / "metrics.jsonl"
        self._prepare_output()

    # ------------------------------------------------------------------ setup

    def _make_env(self, problems: Sequence[CodeProblem]) -> CodeCollabEnv:
        from llm_envs.code_collab import parallel_env

        config = self.config
        return parallel_env(
            problems=tuple(problems),
            num_agents=config.num_agents,
            num_turns=config.num_turns,
            external_mode=config.external_mode,
            **config.env_kwargs,
        )

    def _latest_checkpoint(self) -> Path | None:
        folder = self.output_dir / "checkpoints"
        if not folder.is_dir():
            return None
        done = [p for p in folder.glob("iteration_*") if (p / "trainer_state.json").is_file()]
        return max(done, key=lambda p: p.name) if done else None

    def _prepare_output(self) -> None:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        (self.output_dir / "config.json").write_text(self.config.to_json())
        # Lines past the last checkpoint are about to be redone: drop them.
        if self.metrics_path.exists():
            kept = [
                line + "\n"
                for line in self.metrics_path.read_text().splitlines()
                if line.strip() and json.loads(line)["iteration"] < self.start_iteration
            ]
            self.metrics_path.write_text("".join(kept))

    def _log(self, metrics: Mapping[str, Any]) -> None:
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(dict(metrics), sort_keys=True) + "\n")

    def write_episodes(self, name: str, records: Sequence[Mapping[str, Any]]) -> Path | None:
        """Write episode records to ``OUTPUT_DIR/episodes/{name}.jsonl`` (for the report)."""
        if not records:
            return None
        folder = self.output_dir / "episodes"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.jsonl"
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        path.write_text(lines, encoding="utf-8")
        return path

    def save_checkpoint(self, iteration: int) -> Path:
        """Save every agent's model, tokenizer and optimizer after ``iteration`` iterations."""
        folder = self.output_dir / "checkpoints"
        final = folder / f"iteration_{iteration:06d}"
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        for agent, model in self.models.items():
            model.save_pretrained(tmp / agent)
            self.tokenizer.save_pretrained(tmp / agent)
            torch.save(self.optimizers[agent].state_dict(), tmp / agent / "optimizer.pt")
        (tmp / "trainer_state.json").write_text(json.dumps({"iteration": iteration}))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)  # complete or absent: a crash while saving keeps the previous one
        for old in folder.glob("iteration_*"):
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
        return final

    # --------------------------------------------------------------- rollouts

    def iteration_problems(self, iteration: int) -> list[CodeProblem]:
        """The problems of ``iteration``: a pure function of the seed and the index."""
        count, n = self.config.problems_per_iteration, len(self.train_problems)
        chosen = []
        for position in range(iteration * count, (iteration + 1) * count):
            epoch, offset = divmod(position, n)
            order = np.random.default_rng([self.config.seed, epoch]).permutation(n)
            chosen.append(self.train_problems[int(order[offset])])
        return chosen

    def _roots(self, problems: Sequence[CodeProblem]) -> list[CodeCollabEnv]:
        roots = []
        for problem in problems:
            env = self._make_env(self.train_problems)
            env.reset(seed=self.config.seed, options={"problem": problem})
            roots.append(env)
        return roots

    def _seed(self, *parts: int) -> int:
        return int(np.random.SeedSequence([self.config.seed, *parts]).generate_state(1)[0])

    def sample_trees(self, iteration: int) -> tuple[list[TreeNode], list[NodeCredit]]:
        """Grow this iteration's trees and assign their credit."""
        config = self.config
        params = SamplingParams(
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=self._seed(0, iteration),
        )
        trees = grow_trees(
            self._roots(self.iteration_problems(iteration)),
            self.samplers,
            params,
            group_size=config.group_size,
            joint_mode=config.joint_mode,
            num_turns=config.num_turns,
            termination_threshold=config.termination_threshold,
        )
        credits = [
            tree_credit(credit_node(tree), config.discount, config.return_reduction)
            for tree in trees
        ]
        return trees, credits

    # --------------------------------------------------------------- training

    def _examples(
        self, trees: Sequence[TreeNode], credits: Sequence[NodeCredit]
    ) -> dict[str, list[tuple[Completion, float]]]:
        """Every agent's completions with their advantages, over all nodes of all trees."""
        examples: dict[str, list[tuple[Completion, float]]] = {a: [] for a in self.agents}
        for tree, credit in zip(trees, credits, strict=True):
            walked = zip(iter_nodes(tree), iter_credit(credit_node(tree), credit), strict=True)
            for node, (_, _, node_credit) in walked:
                for a, agent in enumerate(self.agents):
                    advantages_G = node_credit.advantages_A_G[a]
                    examples[agent].extend(zip(node.completions[agent], advantages_G, strict=True))
        return examples

    def optimize(
        self, examples: Mapping[str, Sequence[tuple[Completion, float]]]
    ) -> dict[str, float]:
        """One optimizer step per agent on ``-mean(A * sum of completion logprobs)``."""
        config = self.config
        metrics: dict[str, float] = {}
        for agent, items in examples.items():
            model, optimizer = self.models[agent], self.optimizers[agent]
            name = f"optim/{agent}"
            num_completions = len(items)
            # A completion with A = 0 adds exactly nothing to the gradient; it still
            # counts in the mean, so the loss scale does not depend on skipping it.
            trained = [(c, a) for c, a in items if a != 0.0 and c.tokens]
            metrics[f"{name}/completions"] = float(num_completions)
            metrics[f"{name}/trained_completions"] = float(len(trained))
            metrics[f"{name}/advantage_abs"] = float(np.mean([abs(a) for _, a in items] or [0]))
            metrics[f"{name}/completion_tokens"] = float(np.mean([len(c.tokens) for c, _ in items]))
            if not trained:
                metrics[f"{name}/loss"] = 0.0
                metrics[f"{name}/grad_norm"] = 0.0
                continue
            optimizer.zero_grad(set_to_none=True)
            loss_total, diff_sum, tokens, forward_tokens = 0.0, 0.0, 0.0, 0
            for logprobs_B_T, advantages_B_T, mask_B_T, sampled_B_T, width in self._forward(
                model, trained
            ):
                loss = policy_gradient_loss(logprobs_B_T, advantages_B_T, mask_B_T, num_completions)
                if not torch.isfinite(loss):
                    raise FloatingPointError(
                        f"{agent}'s loss is {float(loss)}; lower learning_rate or check the "
                        "model's precision (the step was not taken)"
                    )
                loss.backward()
                loss_total += float(loss.detach())
                forward_tokens += width
                with torch.no_grad():
                    diff = (logprobs_B_T.detach() - sampled_B_T).abs() * mask_B_T
                    diff_sum += float(diff.sum())
                    tokens += float(mask_B_T.sum())
            parameters = [p for p in model.parameters() if p.grad is not None]
            max_norm = config.max_grad_norm if config.max_grad_norm > 0 else math.inf
            grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            metrics[f"{name}/loss"] = loss_total
            metrics[f"{name}/grad_norm"] = float(grad_norm)
            # Mean |training - sampling| logprob per trained token: ~0 when on-policy.
            metrics[f"{name}/sample_train_logprob_diff"] = diff_sum / max(tokens, 1.0)
            metrics[f"{name}/forward_tokens"] = float(forward_tokens)
        return metrics

    def _forward(
        self, model: Any, trained: Sequence[tuple[Completion, float]]
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]]:
        """Microbatches' ``(logprobs, advantages, mask, sampling logprobs, tokens run)``.

        Each tensor is ``(rows, columns)`` over completion tokens (advantages set on
        the mask); the generator yields after each forward pass, so the caller's
        backward frees the graph before the next one.
        """
        config = self.config
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast)
        if config.share_prompts:
            for prompt, chunk in _prompt_groups(trained, config.max_tokens_per_microbatch):
                completions = [c for c, _ in chunk]
                with autocast:
                    logprobs_K_C, mask_K_C = shared_prompt_logprobs(
                        model,
                        prompt,
                        [c.tokens for c in completions],
                        self.device,
                        temperature=config.temperature,
                        pad_token_id=self.pad_token_id,
                    )
                sampled_K_C = torch.zeros_like(mask_K_C)
                for row, c in enumerate(completions):
                    sampled_K_C[row, : len(c.logprobs)] = torch.tensor(c.logprobs)
                advantages_K = torch.tensor([a for _, a in chunk], device=self.device)
                width = len(prompt) + sum(len(c.tokens) for c in completions)
                yield logprobs_K_C, advantages_K[:, None] * mask_K_C, mask_K_C, sampled_K_C, width
            return
        data = [d for c, a in trained if (d := _datum(c, a)) is not None]
        for batch in _microbatches([len(d) for d in data], config.max_tokens_per_microbatch):
            with autocast:
                logprobs_B_T, inputs = completion_logprobs(
                    model,
                    [data[i] for i in batch],
                    self.device,
                    temperature=config.temperature,
                    pad_token_id=self.pad_token_id,
                )
            width = sum(len(data[i]) for i in batch)
            mask_B_T = inputs["weights"]
            yield logprobs_B_T, inputs["advantages"], mask_B_T, inputs["sampling_logprobs"], width

    # ------------------------------------------------------------- evaluation

    @torch.no_grad()
    def evaluate(self, iteration: int | None = None) -> dict[str, float]:
        """One near-greedy episode per held-out problem; ``eval/turn_{t}/...`` metrics.

        With ``iteration`` and ``save_episodes`` > 0, the episodes' records go to
        ``episodes/eval_{iteration}.jsonl``.
        """
        config = self.config
        if not self.eval_problems:
            return {}
        roots = []
        for problem in self.eval_problems:
            env = self._make_env(self.eval_problems)
            env.reset(seed=config.seed, options={"problem": problem})
            roots.append(env)
        params = SamplingParams(
            max_tokens=config.max_tokens, temperature=config.eval_temperature, seed=self._seed(1)
        )
        # A chain is a tree with G = 1: the same code runs training and evaluation.
        chains = grow_trees(roots, self.samplers, params, group_size=1, num_turns=config.num_turns)
        if iteration is not None and config.save_episodes:
            records = [
                {**path_record(chain), "iteration": iteration, "phase": "eval"} for chain in chains
            ]
            self.write_episodes(f"eval_{iteration:05d}", records)
        metrics = tree_metrics(chains, prefix="eval")
        last = f"eval/turn_{config.num_turns}"
        for key in ("reward", "pass_rate", "solved"):
            if f"{last}/{key}" in metrics:
                metrics[f"eval/final/{key}"] = metrics[f"{last}/{key}"]
        metrics["eval/num_problems"] = float(len(roots))
        return metrics

    # -------------------------------------------------------------------- run

    def _eval_due(self, iteration: int) -> bool:
        every = self.config.eval_every
        return bool(self.eval_problems) and every > 0 and iteration % every == 0

    def iterate(self, iteration: int) -> dict[str, Any]:
        """Run one training iteration; return its metrics."""
        start = time.perf_counter()
        metrics: dict[str, Any] = {"iteration": iteration}
        if self._eval_due(iteration):
            metrics.update(self.evaluate(iteration))
            metrics["time/eval"] = time.perf_counter() - start
        sample_start = time.perf_counter()
        trees, credits = self.sample_trees(iteration)
        metrics["time/sample"] = time.perf_counter() - sample_start
        saved = min(self.config.save_episodes, len(trees))
        records = [
            {**path_record(tree, credit), "iteration": iteration, "phase": "train"}
            for tree, credit in zip(trees[:saved], credits[:saved], strict=True)
        ]
        self.write_episodes(f"iter_{iteration:05d}", records)
        metrics.update(tree_metrics(trees, credits, prefix="env"))
        train_start = time.perf_counter()
        metrics.update(self.optimize(self._examples(trees, credits)))
        metrics["time/train"] = time.perf_counter() - train_start
        metrics["time/iteration"] = time.perf_counter() - start
        metrics["progress/done_frac"] = (iteration + 1) / self.config.num_iterations
        return metrics

    def run(self) -> Path:
        """Train from the start or the last checkpoint to ``num_iterations``; return the metrics."""
        config = self.config
        for iteration in _progress(
            range(self.start_iteration, config.num_iterations),
            initial=self.start_iteration,
            total=config.num_iterations,
            enabled=config.progress,
        ):
            metrics = self.iterate(iteration)
            # Log, then save: a run killed in between redoes this iteration and its line.
            self._log(metrics)
            done = iteration + 1
            if done == config.num_iterations or (
                config.save_every and done % config.save_every == 0
            ):
                self.save_checkpoint(done)
        if self.eval_problems and config.eval_every > 0:
            final = config.num_iterations
            self._log({"iteration": final, **self.evaluate(final)})
        for agent, model in self.models.items():
            model.save_pretrained(self.output_dir / "final_model" / agent)
            self.tokenizer.save_pretrained(self.output_dir / "final_model" / agent)
        return self.metrics_path


def _progress(items: range, *, initial: int, total: int, enabled: bool) -> Iterator[int] | Any:
    if not enabled:
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the train extra
        return items
    return tqdm(items, initial=initial, total=total, desc="iterations", unit="it")


def train(config: MAGRPOConfig) -> Path:
    """Train (or resume) with ``config``; return the path of ``metrics.jsonl``."""
    return MAGRPOTrainer(config).run()


def main(argv: Sequence[str] | None = None) -> None:
    """The command line: ``python -m baselines.magrpo --help``."""
    config = parse_config(MAGRPOConfig, argv, prog="python -m baselines.magrpo")
    path = train(config)
    print(f"metrics written to {path}")
