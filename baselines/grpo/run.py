"""Train in llm-envs environments with TRL's ``GRPOTrainer``: adapters and a command line.

::

    python -m baselines.grpo --env debate              # SmolLM2-135M-Instruct, CPU, minutes
    python -m baselines.grpo --env expert_iteration --strategy two_turn_feedback
    python -m baselines.grpo --env debate --model Qwen/Qwen2.5-0.5B-Instruct --max-steps 200

The rollout function (:class:`~baselines.grpo.rollout_func.FamilyRollout`,
one for every registered family: ``--env`` is checked against the registry)
plays the family's own training plan for each of TRL's prompts with the
trainer's current weights and returns prompt ids, completion ids, sampling
logprobs and ``env_mask`` (environment tokens inside a multi-turn completion
are masked out of the loss, :mod:`baselines.grpo.assembly`), plus each
completion's environment return for the reward function
:func:`~baselines.grpo.reward.env_reward`.

The command line maps a :class:`GRPORunConfig` to a ``trl.GRPOConfig``:

* on CPU: fp32 (``bf16=False``), no vLLM, no gradient checkpointing;
* on a GPU: bf16, gradient checkpointing, and vLLM in ``colocate`` mode when
  vLLM is installed (TRL keeps its engine's weights in sync; the adapters
  sample through it);
* always: ``num_generations`` = the trajectories of one training group (a
  debate's debaters, the episodes of one problem), ``max_completion_length`` =
  ``max_tokens`` times the most turns an agent takes (the family says),
  ``scale_rewards="none"`` (the seeds' mean baseline, no std
  normalization), ``report_to`` as configured (TRL's own trackers; ``project``
  and ``WANDB_PROJECT``, unless set, from ``project``), and in the output
  folder a ``metrics.jsonl`` and ``episodes/step_NNNNN.jsonl`` transcripts that
  ``python -m baselines.report`` turns into plots and a transcript viewer;
* with ``lora_r > 0``: a ``peft.LoraConfig`` as the trainer's ``peft_config``
  (TRL wraps the model and, with vLLM, merges the adapter into the engine's
  weights);
* with ``sampler_url``: no TRL vLLM; the rollouts sample from those
  ``vllm serve`` servers (:func:`~baselines.grpo.sampling.use_servers`), which
  get the trained weights (LoRA merged, shards gathered) before the first
  rollout after each optimizer step, through ``sampler_weights_dir`` or NCCL.

See ``docs/trl_grpo.md`` for what maps to what and when to use the
importance-sampling trainer instead.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from baselines.cli import parse_config
from baselines.grpo.config import GRPORunConfig
from baselines.grpo.reward import env_reward
from baselines.grpo.rollout_func import EnvRollout, FamilyRollout
from baselines.grpo.sampling import use_servers
from baselines.models import resolve_model
from baselines.progress import phase, say
from baselines.run_directory import RunDirectory
from baselines.threads import apply_threads
from baselines.training.lora import lora_config, require_peft
from baselines.training.run import console, interrupts_end_cleanly, setup_errors_exit
from baselines.training.trackers import require_tracker

__all__ = [
    "build_rollout",
    "build_trainer",
    "grpo_config",
    "grpo_config_kwargs",
    "main",
    "save_final_model",
]


def _on_gpu(cfg: GRPORunConfig) -> bool:
    if cfg.device != "auto":
        return cfg.device == "cuda"
    import torch

    return bool(torch.cuda.is_available())


def build_rollout(cfg: GRPORunConfig) -> FamilyRollout:
    """The rollout function of ``cfg.env``: its family's own plan, configured from ``cfg``.

    The family takes what it needs of the run's settings (its ``run_options``:
    ``num_generations`` and ``strategy`` for the families that take them) and
    plays every agent's episode as one growing chat (``chat_observations``).

    The data set has one row for each group the run trains on: ``max_steps``
    times ``items_per_step`` per process (accelerate's ``WORLD_SIZE``). TRL
    shuffles the rows, and group ``g`` plays the family's ``g``-th problem in
    its seeded order, so a run visits distinct problems until it has seen them
    all.
    """
    given = {"env", "env_kwargs", "task", "task_kwargs", "seed"}  # passed as themselves
    settings = {
        f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in given
    }
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    return FamilyRollout.for_env(
        cfg.env,
        cfg.env_kwargs,
        task=cfg.task,
        task_kwargs=cfg.task_kwargs,
        seed=cfg.seed,
        num_groups=cfg.max_steps * cfg.items_per_step * processes,
        options=settings,
        max_tokens_per_turn=cfg.max_tokens,
        save_episodes=cfg.save_episodes,
        credit=cfg.credit,
    )


def grpo_config_kwargs(
    cfg: GRPORunConfig, num_generations: int, *, gpu: bool, max_turns: int = 1
) -> dict[str, Any]:
    """The ``trl.GRPOConfig`` arguments of a run on CPU or GPU (see the module docstring).

    Args:
        cfg: the run.
        num_generations: completions per group (the rollout's).
        gpu: whether the run trains on a GPU.
        max_turns: the most turns one completion holds (the rollout's
            :attr:`~baselines.grpo.rollout_func.EnvRollout.max_turns`).
    """
    if cfg.sampler_url:
        use_vllm = False  # the servers sample (the config refuses vllm='on' with them)
    elif cfg.vllm == "auto":
        use_vllm = gpu and importlib.util.find_spec("vllm") is not None
    else:
        use_vllm = cfg.vllm == "on"
    if use_vllm and not gpu:
        raise ValueError("vllm='on' needs a GPU (TRL runs its vLLM engine on CUDA); use vllm='off'")
    return {
        "output_dir": cfg.output_dir,
        "max_steps": cfg.max_steps,
        "learning_rate": cfg.learning_rate,
        "per_device_train_batch_size": cfg.items_per_step * num_generations,
        "num_generations": num_generations,
        # Model tokens per completion at most; TRL reads it for dr_grpo's normalizer.
        "max_completion_length": cfg.max_tokens * max_turns,
        "temperature": cfg.temperature,
        "loss_type": cfg.loss_type,
        "scale_rewards": cfg.scale_rewards,
        "beta": cfg.beta,
        "bf16": gpu,
        "use_cpu": not gpu,
        "gradient_checkpointing": gpu,
        "use_vllm": use_vllm,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": cfg.vllm_gpu_memory_utilization,
        "vllm_max_model_length": cfg.vllm_max_model_length,
        # The rollout samples between TRL's own generate calls: the engine must stay awake.
        "vllm_enable_sleep_mode": False,
        "report_to": cfg.report_to,
        "project": cfg.project,
        "run_name": Path(cfg.output_dir).resolve().name,
        "logging_steps": 1,
        "save_strategy": "no",
        "seed": cfg.seed,
    }


def save_final_model(trainer: Any, output_dir: str) -> Path:
    """Save the trained model and tokenizer in ``OUTPUT_DIR/final_model`` (as every trainer does).

    Never in ``OUTPUT_DIR`` itself: the model's ``config.json`` would replace the
    run's (its settings), and the report would show architecture fields as them.
    """
    folder = RunDirectory(output_dir).final_model_dir
    trainer.save_model(str(folder))
    return folder


def grpo_config(cfg: GRPORunConfig, num_generations: int, *, max_turns: int = 1) -> Any:
    """The ``trl.GRPOConfig`` of a run, on a GPU when ``cfg.device`` asks for or finds one."""
    from trl import GRPOConfig

    kwargs = grpo_config_kwargs(cfg, num_generations, gpu=_on_gpu(cfg), max_turns=max_turns)
    return GRPOConfig(**kwargs)


def _metrics_callback(run_dir: RunDirectory) -> Any:
    """A ``TrainerCallback`` that logs every TRL log in the run's metrics (``iteration`` = step)."""
    from transformers import TrainerCallback

    class MetricsFile(TrainerCallback):
        def on_log(
            self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any
        ) -> None:
            if logs:
                run_dir.log({"iteration": state.global_step, **logs})

    return MetricsFile()


def build_trainer(cfg: GRPORunConfig, rollout_func: EnvRollout | None = None) -> Any:
    """A ``trl.GRPOTrainer`` for ``cfg``: model, tokenizer, data set, rollout and reward.

    Args:
        cfg: the run.
        rollout_func: the rollout function; default :func:`build_rollout` of
            ``cfg`` (a rollout you pass keeps its own ``save_episodes``).

    The output folder's ``metrics.jsonl`` and ``episodes/step_*.jsonl`` of an
    earlier run are removed, so its report shows this run only. With
    ``cfg.sampler_url`` the trainer samples from those servers
    (:func:`~baselines.grpo.sampling.use_servers`).
    """
    require_peft(cfg.lora_r)  # a missing package fails before any work
    require_tracker(cfg.report_to)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    if cfg.report_to == "wandb":  # transformers' W&B callback reads its project from here
        os.environ.setdefault("WANDB_PROJECT", cfg.project)
    rollout_func = rollout_func or build_rollout(cfg)
    run_dir = RunDirectory(cfg.output_dir)
    run_dir.claim("grpo", cfg.to_json(), overwrite=cfg.overwrite)
    run_dir.start(cfg.to_json())
    run_dir.remove_episodes("step_*.jsonl")
    args = grpo_config(cfg, rollout_func.num_generations, max_turns=rollout_func.max_turns)
    path = resolve_model(cfg.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[env_reward],
        train_dataset=rollout_func.dataset(),
        rollout_func=rollout_func,
        args=args,
        callbacks=[_metrics_callback(run_dir)],
        peft_config=lora_config(cfg) if cfg.lora_r > 0 else None,
    )
    if cfg.sampler_url:
        if cfg.sampler_weight_transfer == "folder" and cfg.sampler_weights_dir is None:
            warnings.warn(
                f"the servers at sampler_url={cfg.sampler_url!r} keep their weights: sampling "
                "drifts off-policy as training goes on; set sampler_weights_dir (a folder they "
                "read, servers with VLLM_SERVER_DEV_MODE=1) to push every step's weights",
                stacklevel=2,
            )
        use_servers(trainer, cfg, model_path=path)
    return trainer


def _step_counter(steps: Any) -> Any:
    """A ``transformers.TrainerCallback`` that advances the phase ``steps`` after each step."""
    from transformers import TrainerCallback

    class CountSteps(TrainerCallback):
        warned = False

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            steps.advance()

        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            logs = kwargs.get("logs") or {}
            if not self.warned and logs.get("frac_reward_zero_std") == 1.0:
                self.warned = True  # once: the first step that learned nothing says why
                say(
                    f"step {state.global_step}: nothing to learn: every group's completions "
                    "were paid the same (frac_reward_zero_std 1), so loss and gradient are 0; "
                    "if it lasts, try more generations per prompt or reward shaping"
                )

    return CountSteps()


def main(
    argv: Sequence[str] | None = None, *, prog: str = "python -m baselines.grpo"
) -> dict[str, Any]:
    """Run ``python -m baselines.grpo`` (``llm-envs grpo``); return the last logged metrics."""
    # rollout_func is experimental in TRL 1.16; we pin the TRL version we adapt to.
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    cfg = parse_config(GRPORunConfig, argv, prog=prog)
    apply_threads(cfg.num_threads)
    with console(cfg.output_dir):
        with setup_errors_exit(prog), phase("set up"):
            trainer = build_trainer(cfg)
        # TRL keeps no checkpoint; its steps are counted for the heartbeat's lines.
        with (
            interrupts_end_cleanly(prog, Path(cfg.output_dir), argv),
            phase("train", total=cfg.max_steps, unit="steps") as steps,
        ):
            trainer.add_callback(_step_counter(steps))
            trainer.train()
        if cfg.save_model:
            with phase("save final model"):
                save_final_model(trainer, cfg.output_dir)
    history = [h for h in trainer.state.log_history if "reward" in h]
    for h in history:
        print(
            f"step {h['step']}: reward {h['reward']:+.3f} (std {h['reward_std']:.3f}), "
            f"model tokens {h.get('completions/mean_length', 0):.0f}"
        )
    print(f"metrics: {RunDirectory(cfg.output_dir).metrics_path}", file=sys.stderr)
    return history[-1] if history else {}
