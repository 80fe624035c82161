"""MAGRPO: multi-agent GRPO on a team's shared reward (the MAGRPO paper).

    python -m baselines.magrpo --help

It trains on any registered environment family with parallel environments
and a team reward (:mod:`baselines.magrpo.roots`): code collaboration by
default, its ``helper`` and ``main`` agents. One model per agent, each with its
own AdamW optimizer; with ``lora_r > 0``, one shared base model and a LoRA
adapter per agent (:mod:`baselines.training.lora`), each agent's optimizer
holding its adapter's parameters, and its sampler switching its adapter on. One
iteration:

1. *Roll out* one tree per training group of the family, rooted at the group's
   episode (:func:`baselines.magrpo.tree.grow_trees`):
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
4. *Log* one JSON line to ``OUTPUT_DIR/metrics.jsonl`` (per-turn reward and the
   env's numeric infos, e.g. pass rate, reward levels and bonus; per-agent loss
   and gradient norm), evaluate on the family's held-out problems with
   near-greedy decoding when due, checkpoint. Transcripts
   (``save_episodes``) go to ``OUTPUT_DIR/episodes/``: one root-to-leaf episode
   of each of the first trees, and the evaluation episodes, for
   ``python -m baselines.report OUTPUT_DIR``.

Under ``accelerate launch`` (a DDP, FSDP or DeepSpeed config) every process
grows its share of the trees and gradients are averaged across processes, so
each step is the one a single process would take on all the trees
(:mod:`baselines.magrpo.processes`).

A trainer never parses the env's text and never names a family: rewards and
their breakdown come from the env's infos, problems from the family's plans.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.magrpo.config import MAGRPOConfig
from baselines.magrpo.credit import NodeCredit, iter_credit, tree_credit
from baselines.magrpo.models import load_agent_models, make_optimizers
from baselines.magrpo.passes import PassSettings, agent_passes
from baselines.magrpo.processes import AgentProcesses
from baselines.magrpo.roots import plan_roots, team_family
from baselines.magrpo.tree import (
    TreeNode,
    credit_node,
    grow_trees,
    iter_nodes,
    merge_tree_values,
    path_record,
    summarize_tree_values,
    tree_metric_values,
)
from baselines.samplers.base import Completion, Policy, SamplingParams
from baselines.training.checkpoints import (
    checkpoint_iteration,
    latest_checkpoint,
    load_checkpoint,
    writing_checkpoint,
)
from baselines.training.checkpoints import save_checkpoint as save_accelerate_state
from baselines.training.lora import (
    AdapterPolicy,
    save_adapter,
)
from baselines.training.losses import reinforce_loss
from baselines.training.run import (
    TrainingRun,
    accumulating,
    command_line,
    start_run,
    train_with,
)
from baselines.training.weights import loading_whole_models
from llm_envs.family import EpisodePlan, Family
from llm_envs.seeding import derive_seed

__all__ = ["MAGRPOConfig", "MAGRPOTrainer", "main", "train"]

_EVAL_SEED = 7919  # evaluation episodes are the same at every evaluation, so they compare


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
            :class:`~baselines.samplers.TransformersPolicy` on the agent's model,
            which always samples with the current weights; under FSDP or ZeRO-3,
            a copy of it refreshed after every step). A custom sampler must
            return the completion's prompt tokens as the agent's model reads
            them; under FSDP or ZeRO-3 none can be given.

    Raises:
        ValueError: a family MAGRPO cannot train, or a bad env or task setting
            (:func:`baselines.magrpo.roots.team_family`), before a model is loaded.
    """

    def __init__(
        self,
        config: MAGRPOConfig,
        *,
        models: Mapping[str, Any] | None = None,
        tokenizer: Any | None = None,
        samplers: Mapping[str, Policy] | None = None,
    ) -> None:
        self.config = config
        # The family (its eval_problems held out); one MAGRPO cannot train fails here.
        self.family: Family = team_family(config)
        self.agents: list[str] = list(self.family.agents)
        held = self.family.num_eval_problems  # None: as many as asked
        self.num_eval_problems = (
            config.eval_problems if held is None else min(config.eval_problems, held)
        )
        # The experiment trackers (report_to) and the launched processes are accelerate's;
        # the models stay plain torch unless FSDP or DeepSpeed prepares them. The seed is
        # the same on every process: adapters start alike.
        start = start_run(config, "magrpo", accelerate_autocast=False, seed_per_process=False)
        self.autocast = start.bf16
        self.accelerator, self.run_dir = start.accelerator, start.run_dir
        self.processes = AgentProcesses(self.accelerator, lora=config.lora_r > 0)
        if self.processes.whole_copies and samplers is not None:
            raise ValueError(
                "samplers= cannot be given under FSDP or DeepSpeed ZeRO-3: each agent samples "
                "with a whole copy of its model, which the trainer refreshes from the shards; "
                "launch with configs/accelerate/ddp.yaml to sample with your own policies"
            )
        self.processes.check_share(config.problems_per_iteration)
        self.device = self.processes.device
        self.output_dir = Path(config.output_dir)

        checkpoint = latest_checkpoint(self.output_dir)
        self.start_iteration = 0 if checkpoint is None else checkpoint_iteration(checkpoint)
        if checkpoint is not None:
            self.processes.check_checkpoint(checkpoint)
        # FSDP and DeepSpeed: accelerate's state, loaded below.
        own_folders = None if self.processes.accelerate_checkpoints else checkpoint
        self.shared = config.lora_r > 0  # one base model, an adapter per agent
        with loading_whole_models(self.accelerator):  # ZeRO-3: prepare() partitions them
            loaded = load_agent_models(config, self.agents, models, tokenizer, own_folders)
        self.tokenizer, self.actions_only = loaded.tokenizer, loaded.actions_only
        models = {agent: loaded.models[agent].to(self.device) for agent in self.agents}
        for model in models.values():
            model.train()
        optimizers = make_optimizers(config, models, own_folders, self.device)
        self.samplers = self._build_samplers(models, samplers)
        self.models, self.optimizers = self.processes.prepare(models, optimizers)
        if self.processes.accelerate_checkpoints and checkpoint is not None:
            load_checkpoint(self.accelerator, checkpoint)
            for agent in self.agents:
                self._refresh(agent)
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else 0)
        self.pass_settings = PassSettings(
            device=self.device,
            # In lockstep every process must run the same forward passes: one row each.
            share_prompts=config.share_prompts and not self.processes.lockstep,
            max_tokens_per_microbatch=config.max_tokens_per_microbatch,
            temperature=config.temperature,
            pad_token_id=self.pad_token_id,
            actions_only=self.actions_only,
        )
        self.run_dir.start(config.to_json(), resume_from=self.start_iteration)
        self.metrics_path = self.run_dir.metrics_path
        if self.processes.layout != "single" and self.processes.writer:
            print(
                f"magrpo: agents {self.agents} on {self.processes.world} x {self.device} "
                f"({self.processes.layout}), starting at iteration {self.start_iteration}",
                flush=True,
            )

    # ------------------------------------------------------------------ setup

    def _build_samplers(
        self, models: Mapping[str, Any], given: Mapping[str, Policy] | None
    ) -> dict[str, Policy]:
        """Each agent's sampler: ``given``, or a transformers policy on its model.

        Under FSDP and ZeRO-3 it is a whole copy per agent, made before the
        model is sharded and refreshed from the gathered shards after each of
        the agent's steps (:meth:`_refresh`). With LoRA each agent samples with
        its own adapter switched on.
        """
        from baselines.samplers.transformers_policy import TransformersPolicy

        self._copies: dict[str, TransformersPolicy] = {}
        if given is None:
            policies = {
                agent: TransformersPolicy(self.processes.sampling_model(model), self.tokenizer)
                for agent, model in models.items()
            }
            self._copies = policies if self.processes.whole_copies else {}
            given = policies
        if not self.shared:
            return dict(given)
        return {agent: AdapterPolicy(p, models[agent], agent) for agent, p in given.items()}

    def write_episodes(self, name: str, records: Sequence[Mapping[str, Any]]) -> Path | None:
        """Write episode records to ``OUTPUT_DIR/episodes/{name}.jsonl`` (for the report)."""
        return self.run_dir.write_episodes(name, records)

    def _write_records(
        self, name: str, records: Sequence[tuple[int, Mapping[str, Any]]]
    ) -> Path | None:
        """Every process's ``(problem index, record)`` pairs, written in problem order."""
        gathered = sorted(self.processes.gather(list(records)), key=lambda pair: pair[0])
        return self.write_episodes(name, [record for _, record in gathered])

    def save_checkpoint(self, iteration: int) -> None:
        """Save every agent's model, tokenizer and optimizer after ``iteration`` iterations.

        One process or DDP: a folder per agent, written by the main process. FSDP
        and DeepSpeed: ``accelerate``'s state of every agent's model and
        optimizer (in agent order), written by every process.
        """
        if self.processes.accelerate_checkpoints:
            save_accelerate_state(
                self.accelerator,
                self.models[self.agents[0]],  # the agents share the architecture in config.json
                self.output_dir,
                iteration,
                self.tokenizer,
                keep=self.config.keep_checkpoints,
            )
            return
        writer = self.processes.writer
        with writing_checkpoint(
            self.output_dir,
            iteration,
            keep=self.config.keep_checkpoints,
            writer=writer,
            barrier=self.accelerator.wait_for_everyone,
        ) as folder:
            for agent in self.models if writer else ():
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

    def iteration_groups(self, iteration: int) -> list[int]:
        """The family's training groups of ``iteration`` (global indices), one tree each.

        The family's plan for a group index is a pure function of the seed and
        the index (for code collaboration, the problems in a seeded order,
        reshuffled every pass over the data).
        """
        count = self.config.problems_per_iteration
        return list(range(iteration * count, (iteration + 1) * count))

    def iteration_plan(self, groups: Sequence[int]) -> EpisodePlan:
        """The family's training plan for ``groups`` (see :meth:`iteration_groups`)."""
        return self.family.training(list(groups), self.config.seed)

    def _seed(self, *parts: int) -> int:
        return int(np.random.SeedSequence([self.config.seed, *parts]).generate_state(1)[0])

    def sample_trees(self, iteration: int) -> tuple[list[TreeNode], list[NodeCredit]]:
        """Grow this process's share of the iteration's trees and assign their credit.

        With several processes, process ``r`` of ``P`` grows the trees of the
        iteration's problems ``r, r + P, ...``.
        """
        config = self.config
        params = SamplingParams(
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=self._seed(0, iteration, *self.processes.seed_key),
        )
        mine = self.processes.share(self.iteration_groups(iteration))
        roots, resets = plan_roots(self.iteration_plan([group for _, group in mine]))
        trees = grow_trees(
            roots,
            self.samplers,
            params,
            group_size=config.group_size,
            joint_mode=config.joint_mode,
            num_turns=config.num_turns,
            termination_threshold=config.termination_threshold,
            reset_results=resets,
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
        """One optimizer step per agent on ``-mean(A * sum of completion logprobs)``.

        ``examples`` are this process's completions; the mean is over every
        process's (see :mod:`baselines.magrpo.processes`).
        """
        metrics: dict[str, float] = {}
        # A completion with A = 0 adds exactly nothing to the gradient; it still
        # counts in the mean, so the loss scale does not depend on skipping it.
        trained = {
            agent: [(c, a) for c, a in items if a != 0.0 and c.tokens]
            for agent, items in examples.items()
        }
        local = [
            value
            for agent, items in examples.items()
            for value in (
                len(items),
                len(trained[agent]),
                sum(abs(a) for _, a in items),
                sum(len(c.tokens) for c, _ in items),
            )
        ]
        totals = iter(self.processes.sum(local))  # every process's completions
        for agent in examples:
            name = f"optim/{agent}"
            count, trained_count, advantage_abs, tokens = (next(totals) for _ in range(4))
            metrics[f"{name}/completions"] = count
            metrics[f"{name}/trained_completions"] = trained_count
            metrics[f"{name}/advantage_abs"] = advantage_abs / count if count else 0.0
            metrics[f"{name}/completion_tokens"] = tokens / count if count else 0.0
            if not trained_count:  # the same on every process: no step anywhere
                metrics[f"{name}/loss"] = 0.0
                metrics[f"{name}/grad_norm"] = 0.0
                continue
            step = self._agent_step(agent, trained[agent], int(count))
            metrics.update({f"{name}/{key}": value for key, value in step.items()})
        return metrics

    def _agent_step(
        self, agent: str, trained: Sequence[tuple[Completion, float]], num_completions: int
    ) -> dict[str, float]:
        """One optimizer step of ``agent`` on this process's share of its batch."""
        config = self.config
        model, optimizer = self.models[agent], self.optimizers[agent]
        if self.shared:
            model.set_adapter(agent)  # the agent's adapter on, and the only trainable one
        optimizer.zero_grad(set_to_none=True)
        passes = agent_passes(trained, self.pass_settings)
        count = self.processes.microbatches(len(passes))
        loss_total, diff_sum, tokens, forward_tokens = 0.0, 0.0, 0.0, 0
        for m in range(count):
            with accumulating(self.accelerator, model, last=m == count - 1):
                if m >= len(passes):  # in lockstep: as many passes as the busiest process
                    self.processes.empty_backward(model, self.pad_token_id, last=m == count - 1)
                    continue
                with self._autocast():
                    out = passes[m](model)
                loss = reinforce_loss(
                    out.logprobs_B_T, out.advantages_B_T, out.mask_B_T, num_completions
                )
                if not torch.isfinite(loss):
                    raise FloatingPointError(
                        f"{agent}'s loss is {float(loss)}; lower learning_rate or check the "
                        "model's precision (the step was not taken)"
                    )
                # Gradients are averaged over the processes: each adds its share times P.
                self.processes.backward(model, loss * self.processes.world, last=m == count - 1)
            loss_total += float(loss.detach())
            forward_tokens += out.width
            with torch.no_grad():
                diff = (out.logprobs_B_T.detach() - out.sampled_B_T).abs() * out.mask_B_T
                diff_sum += float(diff.sum())
                tokens += float(out.mask_B_T.sum())
        self.processes.average_gradients([p for g in optimizer.param_groups for p in g["params"]])
        max_norm = config.max_grad_norm if config.max_grad_norm > 0 else math.inf
        grad_norm = self.processes.clip_gradients(model, max_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        self._refresh(agent)
        loss_sum, diff_sum, token_sum, width_sum = self.processes.sum(
            [loss_total, diff_sum, tokens, forward_tokens]
        )
        return {
            "loss": loss_sum,
            "grad_norm": grad_norm,
            # Mean |training - sampling| logprob per trained token: ~0 when on-policy.
            "sample_train_logprob_diff": diff_sum / max(token_sum, 1.0),
            "forward_tokens": width_sum,
        }

    def _autocast(self) -> torch.autocast:
        device = torch.device(self.device).type  # "cuda", or "cpu" with bf16 arithmetic
        return torch.autocast(device, dtype=torch.bfloat16, enabled=self.autocast)

    def _refresh(self, agent: str) -> None:
        """With whole copies: load the agent's gathered weights into its copy (every process)."""
        weights = self.processes.full_weights(self.models[agent])
        if weights is not None and agent in self._copies:
            self._copies[agent].update_weights(weights)

    # ------------------------------------------------------------- evaluation

    @torch.no_grad()
    def evaluate(self, iteration: int | None = None) -> dict[str, float]:
        """One near-greedy episode per evaluation group of the family; ``eval/turn_{t}/...``.

        With ``iteration`` and ``save_episodes`` > 0, the episodes' records go to
        ``episodes/eval_{iteration}.jsonl``.
        """
        config = self.config
        if not self.num_eval_problems:
            return {}
        # Every process plays its share of the held-out problems.
        mine = self.processes.share(range(self.num_eval_problems))
        plan = self.family.evaluation(
            [index for index, _ in mine], derive_seed(config.seed, _EVAL_SEED)
        )
        roots, resets = plan_roots(plan)
        params = SamplingParams(
            max_tokens=config.max_tokens,
            temperature=config.eval_temperature,
            seed=self._seed(1, *self.processes.seed_key),
        )
        # A chain is a tree with G = 1: the same code runs training and evaluation.
        chains = grow_trees(
            roots,
            self.samplers,
            params,
            group_size=1,
            num_turns=config.num_turns,
            reset_results=resets,
        )
        if iteration is not None and config.save_episodes:
            records = [
                (index, {**path_record(chain), "iteration": iteration, "phase": "eval"})
                for (index, _), chain in zip(mine, chains, strict=True)
            ]
            self._write_records(f"eval_{iteration:05d}", records)
        values = merge_tree_values(self.processes.gather([tree_metric_values(chains)]))
        metrics = summarize_tree_values(values, prefix="eval")
        last = f"eval/turn_{config.num_turns}"
        for key in ("reward", "pass_rate", "solved"):
            if f"{last}/{key}" in metrics:
                metrics[f"eval/final/{key}"] = metrics[f"{last}/{key}"]
        metrics["eval/num_problems"] = float(self.num_eval_problems)
        return metrics

    # -------------------------------------------------------------------- run

    def can_evaluate(self) -> bool:
        """Whether problems are held out for evaluation."""
        return bool(self.num_eval_problems)

    def train_iteration(self, iteration: int) -> dict[str, Any]:
        """Grow the iteration's trees, assign credit, update every agent; return the metrics."""
        start = time.perf_counter()
        trees, credits = self.sample_trees(iteration)
        metrics: dict[str, Any] = {"time/sample": time.perf_counter() - start}
        indices = [i for i, _ in self.processes.share(range(self.config.problems_per_iteration))]
        records = [
            (index, {**path_record(tree, credit), "iteration": iteration, "phase": "train"})
            for index, tree, credit in zip(indices, trees, credits, strict=True)
            if index < self.config.save_episodes
        ]
        self._write_records(f"iter_{iteration:05d}", records)
        values = self.processes.gather([tree_metric_values(trees, credits)])
        metrics.update(summarize_tree_values(merge_tree_values(values), prefix="env"))
        train_start = time.perf_counter()
        metrics.update(self.optimize(self._examples(trees, credits)))
        metrics["time/train"] = time.perf_counter() - train_start
        return metrics

    def save_final_model(self) -> None:
        """Save each agent's model (LoRA: its adapter) and tokenizer in ``final_model/{agent}``.

        Under FSDP and DeepSpeed each agent's weights are gathered first (by
        every process) and its model saved whole; otherwise the main process saves.
        """
        for agent in self.models:
            folder = self.run_dir.final_model_dir / agent
            if self.processes.accelerate_checkpoints:
                model = self.models[agent]
                state = self.accelerator.get_state_dict(model)  # collective: whole on the main
                if self.processes.writer:
                    self.accelerator.unwrap_model(model).save_pretrained(folder, state_dict=state)
                    self.tokenizer.save_pretrained(folder)
            elif self.processes.writer:
                self._save_model(agent, folder)

    def finish(self) -> None:
        """Wait for every process (the main one saves last)."""
        self.accelerator.wait_for_everyone()


def train(config: MAGRPOConfig) -> Path:
    """Train (or resume) with ``config``; return the path of ``metrics.jsonl``.

    Progress lines and quiet libraries as the command line has them
    (:func:`~baselines.training.run.train_with`).
    """
    return train_with(MAGRPOTrainer, config)


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m baselines.magrpo") -> None:
    """The command line: ``python -m baselines.magrpo --help`` (``llm-envs magrpo``)."""
    command_line(MAGRPOConfig, MAGRPOTrainer, argv, prog=prog)
