"""MAGRPO: multi-agent GRPO on the code-collaboration env (seed 004).

    python -m baselines.magrpo --help

One model per agent (``helper`` and ``main``), each with its own AdamW
optimizer; with ``lora_r > 0``, one shared base model and a LoRA adapter per
agent (:mod:`baselines.training.lora`), each agent's optimizer holding its
adapter's parameters, and its sampler switching its adapter on. One iteration:

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

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.data.datums import trajectory_to_data
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
from baselines.run_directory import RunDirectory
from baselines.training.checkpoints import (
    checkpoint_iteration,
    latest_checkpoint,
    writing_checkpoint,
)
from baselines.training.forward import (
    forward_logprobs,
    shared_prompt_logprobs,
    split_microbatches,
    split_prompt_groups,
    supports_logits_to_keep,
)
from baselines.training.lora import (
    AdapterPolicy,
    adapter_parameters,
    add_lora,
    load_adapter,
    require_peft,
    save_adapter,
)
from baselines.training.losses import reinforce_loss
from baselines.training.run import TrainingRun, command_line, limit_threads, seed_everything
from baselines.training.trackers import make_trackers, require_tracker
from baselines.types import Datum, Trajectory, Transition
from llm_envs.code_collab import CodeCollabEnv, load_problems
from llm_envs.tasks import CodeProblem

__all__ = ["MAGRPOConfig", "MAGRPOTrainer", "main", "train"]


def _datum(completion: Completion, advantage: float) -> Datum | None:
    transition = Transition(completion.prompt_tokens, completion.tokens, completion.logprobs)
    data = trajectory_to_data(Trajectory((transition,)), advantage)
    return data[0] if data else None


class MAGRPOTrainer(TrainingRun):
    """Set up a run (one model and optimizer per agent, samplers, resume), then :meth:`run` it.

    The loop, the metrics log and the final evaluation are
    :class:`~baselines.training.run.TrainingRun`'s; this class grows trees,
    assigns credit and updates each agent.

    Args:
        config: the run's configuration.
        models: an already loaded model per agent (default: ``config.model``, one
            copy per agent); each must be its own object. With ``lora_r > 0``:
            the one base model the agents share, given for every agent.
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
        # accelerate ships no type information (no py.typed).
        from accelerate import Accelerator  # type: ignore[import-untyped]

        from baselines.policies.transformers_policy import TransformersPolicy

        self.config = config
        require_peft(config.lora_r)  # a missing package fails before any work
        require_tracker(config.report_to)
        limit_threads(config.num_threads)
        seed_everything(config.seed)
        cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
        self.device = torch.device("cuda" if cuda else "cpu")
        self.autocast = cuda and config.precision in ("auto", "bf16")
        if config.precision == "bf16" and not cuda:
            raise ValueError("precision='bf16' needs CUDA; use fp32 or auto on CPU")
        self.output_dir = Path(config.output_dir)
        self.run_dir = RunDirectory(self.output_dir)
        self.run_dir.create()  # an output folder that cannot be made fails before any work
        # The experiment trackers (report_to) are accelerate's; the models stay plain torch.
        self.accelerator = Accelerator(
            cpu=not cuda,
            log_with=make_trackers(config.report_to, config.output_dir, config.project) or None,
            project_dir=config.output_dir,
        )

        self._split_problems(
            tuple(problems) if problems is not None else load_problems(config.dataset)
        )
        self.agents: list[str] = list(self._make_env(self.train_problems).possible_agents)

        checkpoint = latest_checkpoint(self.output_dir)
        self.start_iteration = 0 if checkpoint is None else checkpoint_iteration(checkpoint)
        self.shared = config.lora_r > 0  # one base model, an adapter per agent
        if self.shared:
            models = self._load_shared_model(models, tokenizer, checkpoint)
        else:
            models = self._load_models(models, tokenizer, checkpoint)
        self.models = {agent: models[agent].to(self.device) for agent in self.agents}
        for model in self.models.values():
            model.train()
        self.optimizers = {
            agent: torch.optim.AdamW(
                adapter_parameters(model, agent) if self.shared else model.parameters(),
                lr=config.learning_rate,
                weight_decay=config.weight_decay,
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
        if self.shared:  # each agent samples with its own adapter switched on
            self.samplers = {
                agent: AdapterPolicy(policy, self.models[agent], agent)
                for agent, policy in self.samplers.items()
            }
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else 0)
        self.actions_only = (
            self.base_actions_only
            if self.shared
            else all(supports_logits_to_keep(m) for m in self.models.values())
        )
        self.run_dir.start(config.to_json(), resume_from=self.start_iteration)
        self.metrics_path = self.run_dir.metrics_path

    # ------------------------------------------------------------------ setup

    def _split_problems(self, problems: Sequence[CodeProblem]) -> None:
        """The last ``eval_problems`` problems are held out; the others are trained on."""
        held_out = self.config.eval_problems
        if held_out >= len(problems):
            raise ValueError(
                f"eval_problems={held_out} leaves no training problems out of {len(problems)}"
            )
        self.train_problems = tuple(problems[: len(problems) - held_out])
        self.eval_problems = tuple(problems[len(problems) - held_out :])

    def _load_models(
        self, models: Mapping[str, Any] | None, tokenizer: Any | None, checkpoint: Path | None
    ) -> Mapping[str, Any]:
        """A model per agent (given, or loaded from ``config.model``); a checkpoint's weights."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if models is None:
            path = resolve_model(self.config.model)
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
        distinct = len({id(m) for m in models.values()}) == len(models)
        if sorted(models) != sorted(self.agents) or not distinct:
            raise ValueError(
                f"give one distinct model per agent {self.agents}, got {sorted(models)}"
            )
        return models

    def _load_shared_model(
        self, models: Mapping[str, Any] | None, tokenizer: Any | None, checkpoint: Path | None
    ) -> Mapping[str, Any]:
        """One base model with a LoRA adapter per agent (a checkpoint's adapters loaded)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if models is None:
            path = resolve_model(self.config.model)
            self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
            base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        else:
            if tokenizer is None:
                raise ValueError("pass tokenizer= together with models=")
            self.tokenizer = tokenizer
            bases = {id(m) for m in models.values()}
            if sorted(models) != sorted(self.agents) or len(bases) != 1:
                raise ValueError(
                    f"with lora_r > 0 the agents {self.agents} share one base model: give the "
                    f"same model object for each, got {sorted(models)} ({len(bases)} objects)"
                )
            base = next(iter(models.values()))
        # Before wrapping: PEFT's forward hides the base model's logits_to_keep argument.
        self.base_actions_only = supports_logits_to_keep(base)
        model = add_lora(base, self.config, adapters=tuple(self.agents))
        if checkpoint is not None:
            for agent in self.agents:
                load_adapter(model, checkpoint / agent, agent)
        return {agent: model for agent in self.agents}

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

    def write_episodes(self, name: str, records: Sequence[Mapping[str, Any]]) -> Path | None:
        """Write episode records to ``OUTPUT_DIR/episodes/{name}.jsonl`` (for the report)."""
        return self.run_dir.write_episodes(name, records)

    def save_checkpoint(self, iteration: int) -> None:
        """Save every agent's model, tokenizer and optimizer after ``iteration`` iterations."""
        with writing_checkpoint(
            self.output_dir, iteration, keep=self.config.keep_checkpoints
        ) as folder:
            for agent in self.models:
                self._save_model(agent, folder / agent)
                torch.save(self.optimizers[agent].state_dict(), folder / agent / "optimizer.pt")

    def _save_model(self, agent: str, folder: Path) -> None:
        """An agent's model (with LoRA: its adapter, in PEFT's format) and the tokenizer."""
        if self.shared:
            save_adapter(self.models[agent], folder, agent)
        else:
            self.models[agent].save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)

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
            if self.shared:
                model.set_adapter(agent)  # the agent's adapter on, and the only trainable one
            optimizer.zero_grad(set_to_none=True)
            loss_total, diff_sum, tokens, forward_tokens = 0.0, 0.0, 0.0, 0
            for logprobs_B_T, advantages_B_T, mask_B_T, sampled_B_T, width in self._forward(
                model, trained
            ):
                loss = reinforce_loss(logprobs_B_T, advantages_B_T, mask_B_T, num_completions)
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
            chunks = split_prompt_groups(
                [c.prompt_tokens for c, _ in trained],
                [len(c.tokens) for c, _ in trained],
                config.max_tokens_per_microbatch,
            )
            for chunk in chunks:
                completions = [trained[i][0] for i in chunk]
                prompt = completions[0].prompt_tokens
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
                advantages_K = torch.tensor([trained[i][1] for i in chunk], device=self.device)
                width = len(prompt) + sum(len(c.tokens) for c in completions)
                yield logprobs_K_C, advantages_K[:, None] * mask_K_C, mask_K_C, sampled_K_C, width
            return
        data = [d for c, a in trained if (d := _datum(c, a)) is not None]
        lengths = [len(d) for d in data]
        limit = config.max_tokens_per_microbatch
        for batch in split_microbatches(lengths, limit, "padded", longest_first=True):
            with autocast:
                logprobs_B_T, _, inputs = forward_logprobs(
                    model,
                    [data[i] for i in batch],
                    "padded",
                    self.device,
                    pad_token_id=self.pad_token_id,
                    actions_only=self.actions_only,
                    temperature=config.temperature,
                )
            width = sum(lengths[i] for i in batch)
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

    def can_evaluate(self) -> bool:
        """Whether problems are held out for evaluation."""
        return bool(self.eval_problems)

    def train_iteration(self, iteration: int) -> dict[str, Any]:
        """Grow the iteration's trees, assign credit, update every agent; return the metrics."""
        start = time.perf_counter()
        trees, credits = self.sample_trees(iteration)
        metrics: dict[str, Any] = {"time/sample": time.perf_counter() - start}
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
        return metrics

    def save_final_model(self) -> None:
        """Save each agent's model (LoRA: its adapter) and tokenizer in ``final_model/{agent}``."""
        for agent in self.models:
            self._save_model(agent, self.run_dir.final_model_dir / agent)


def train(config: MAGRPOConfig) -> Path:
    """Train (or resume) with ``config``; return the path of ``metrics.jsonl``."""
    return MAGRPOTrainer(config).run()


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m baselines.magrpo") -> None:
    """The command line: ``python -m baselines.magrpo --help`` (``llm-envs magrpo``)."""
    command_line(MAGRPOConfig, MAGRPOTrainer, argv, prog=prog)
