"""Train in llm-envs environments with TRL's ``GRPOTrainer``: adapters and a command line.

::

    python -m baselines.grpo --env debate              # SmolLM2-135M-Instruct, CPU, minutes
    python -m baselines.grpo --env expert_iteration --strategy two_turn_feedback
    python -m baselines.grpo --env debate --model Qwen/Qwen2.5-0.5B-Instruct --max-steps 200

The adapters (:mod:`baselines.grpo.adapters`) are TRL rollout functions: they
play our environments with TRL's prompts and the trainer's current weights
and return prompt ids, completion ids, sampling logprobs and ``env_mask``
(environment tokens inside a multi-turn completion are masked out of the loss,
:mod:`baselines.grpo.assembly`), plus each completion's environment return for
the reward function :func:`~baselines.grpo.adapters.env_reward`.

The command line maps a :class:`GRPORunConfig` to a ``trl.GRPOConfig``:

* on CPU: fp32 (``bf16=False``), no vLLM, no gradient checkpointing;
* on a GPU: bf16, gradient checkpointing, and vLLM in ``colocate`` mode when
  vLLM is installed (TRL keeps its engine's weights in sync; the adapters
  sample through it);
* always: ``num_generations`` = the number of debaters (debate) or episodes
  per problem, ``scale_rewards="none"`` (the seeds' mean baseline, no std
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

import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from baselines.cli import parse_config
from baselines.grpo.adapters import (
    DebateRollout,
    EnvRollout,
    code_collab_rollout,
    env_reward,
    expert_iteration_rollout,
)
from baselines.grpo.config import GRPORunConfig
from baselines.grpo.family_rollout import FamilyRollout
from baselines.grpo.sampling import use_servers
from baselines.models import resolve_model
from baselines.run_directory import RunDirectory
from baselines.training.lora import lora_config, require_peft
from baselines.training.run import interrupts_end_cleanly, setup_errors_exit
from baselines.training.trackers import require_tracker
from llm_envs.registration import make_family

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


def _problems(cfg: GRPORunConfig) -> Sequence[Any]:
    from llm_envs import tasks

    task = cfg.task
    if task == "default":
        task = "humaneval" if cfg.env == "code_collab" else "arithmetic"
    if task == "arithmetic":
        settings = dict(cfg.task_kwargs)
        if "operations" in settings:  # JSON gives a list; the task wants a tuple
            settings["operations"] = tuple(settings["operations"])
        settings.setdefault("num_problems", 1000)
        return tasks.ArithmeticTask(seed=settings.pop("seed", cfg.seed), **settings)
    if task == "gsm8k":
        return tasks.load_gsm8k("train")
    if task == "mbpp":
        return tasks.load_mbpp("train")
    loader = getattr(tasks, f"load_{task}")
    return tuple(loader())


def build_rollout(cfg: GRPORunConfig) -> EnvRollout:
    """The rollout function of ``cfg.env``, configured from ``cfg``."""
    common: dict[str, Any] = {
        "max_tokens_per_turn": cfg.max_tokens,
        "seed": cfg.seed,
        "save_episodes": cfg.save_episodes,
    }
    if cfg.env == "debate":
        questions = None
        if cfg.task != "default":
            from llm_envs.debate import DebateQuestion

            questions = [DebateQuestion(p.question, p.answer) for p in _problems(cfg)]
        return DebateRollout(questions, **cfg.env_kwargs, **common)
    if cfg.env == "expert_iteration":
        return expert_iteration_rollout(
            cfg.strategy,
            _problems(cfg),
            num_generations=cfg.num_generations,
            env_kwargs=cfg.env_kwargs,
            **common,
        )
    if cfg.env == "code_collab":
        return code_collab_rollout(
            _problems(cfg),
            num_generations=cfg.num_generations,
            env_kwargs=cfg.env_kwargs,
            **common,
        )
    # Any other registered family: its own training plan, one data-set row per group.
    family = make_family(
        cfg.env, cfg.env_kwargs, task=cfg.task, seed=cfg.seed, task_kwargs=cfg.task_kwargs
    )
    return FamilyRollout(family, **common)


def grpo_config_kwargs(cfg: GRPORunConfig, num_generations: int, *, gpu: bool) -> dict[str, Any]:
    """The ``trl.GRPOConfig`` arguments of a run on CPU or GPU (see the module docstring)."""
    if cfg.sampler_url:
        use_vllm = False  # the servers sample (the config refuses vllm='on' with them)
    elif cfg.vllm == "auto":
        use_vllm = gpu and importlib.util.find_spec("vllm") is not None
    else:
        use_vllm = cfg.vllm == "on"
    if use_vllm and not gpu:
        raise ValueError("vllm='on' needs a GPU (TRL runs its vLLM engine on CUDA); use vllm='off'")
    if cfg.env == "debate":
        max_turns = int(cfg.env_kwargs.get("max_rounds", 3))
    elif cfg.env == "code_collab":
        max_turns = int(cfg.env_kwargs.get("num_turns", 2))
    else:
        max_turns = 2
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


def grpo_config(cfg: GRPORunConfig, num_generations: int) -> Any:
    """The ``trl.GRPOConfig`` of a run, on a GPU when ``cfg.device`` asks for or finds one."""
    from trl import GRPOConfig

    return GRPOConfig(**grpo_config_kwargs(cfg, num_generations, gpu=_on_gpu(cfg)))


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
    args = grpo_config(cfg, rollout_func.num_generations)
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


def main(
    argv: Sequence[str] | None = None, *, prog: str = "python -m baselines.grpo"
) -> dict[str, Any]:
    """Run ``python -m baselines.grpo`` (``llm-envs grpo``); return the last logged metrics."""
    # rollout_func is experimental in TRL 1.16; we pin the TRL version we adapt to.
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    cfg = parse_config(GRPORunConfig, argv, prog=prog)
    with setup_errors_exit(prog):
        trainer = build_trainer(cfg)
    with interrupts_end_cleanly(prog, Path(cfg.output_dir), argv):  # TRL keeps no checkpoint
        trainer.train()
    if cfg.save_model:
        save_final_model(trainer, cfg.output_dir)
    history = [h for h in trainer.state.log_history if "reward" in h]
    for h in history:
        print(
            f"step {h['step']}: reward {h['reward']:+.3f} (std {h['reward_std']:.3f}), "
            f"model tokens {h.get('completions/mean_length', 0):.0f}"
        )
    print(f"metrics: {RunDirectory(cfg.output_dir).metrics_path}", file=sys.stderr)
    return history[-1] if history else {}
