"""Play an evaluation: plan the episodes, play the missing ones, summarize, write the report.

:class:`Evaluation` does it in two steps, so that a mistake in the settings
fails before any model is loaded:

1. ``Evaluation(config)`` checks everything that can be checked without a
   model: the model specs and local folders, the environment's arguments, the
   problems, the seatings (:mod:`baselines.eval.seating`), and the output
   folder (a folder holding another evaluation's results is refused, naming
   the settings that differ). It plans the episodes: problem ``p`` in seating
   ``s`` is episode ``p{p:05d}-s{s:03d}``, reset with a seed of ``p`` alone,
   so every seating of a problem plays the same setting.
2. :meth:`Evaluation.run` reads ``episodes/eval.jsonl``, loads the models the
   missing episodes need, plays those episodes ``concurrency`` at a time
   (:func:`baselines.rollouts.rollout` batches every pending turn per model),
   appends each batch to the file as it finishes, then summarizes every
   planned episode (:func:`baselines.eval.summary.summarize`) into
   ``summary.json`` and the HTML report.

A run stopped at any point (a kill, a server that stays down) loses at most
the batch in flight: run the same command again to finish it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baselines.env_families import derive_seed
from baselines.eval.arenas import make_arena
from baselines.eval.config import PLAN_FIELDS, EvalConfig
from baselines.eval.entrants import Entrant, build_policies, parse_entrants
from baselines.eval.meter import measure_entrants, with_meter
from baselines.eval.results import RESULTS_FILE, EpisodeLog, episode_line
from baselines.eval.seating import seatings
from baselines.eval.summary import EvalSummary, summarize
from baselines.progress import phase, say
from baselines.rollouts import rollout
from baselines.run_directory import RUN_FILE, SUMMARY_FILE, RunDirectory, write_atomically
from baselines.samplers.base import Policy, SamplingParams

__all__ = ["SUMMARY_FILE", "Evaluation", "PlannedEpisode"]


@dataclass(frozen=True)
class PlannedEpisode:
    """One episode of the plan.

    Attributes:
        episode_id: ``p{problem:05d}-s{seating:03d}``: its key in the results file.
        problem: The problem's index.
        seating: The seating's index in the schedule.
        seats: Agent -> the name of the model playing it.
        seed: The environment's reset seed (the same for every seating of a problem).
    """

    episode_id: str
    problem: int
    seating: int
    seats: dict[str, str]
    seed: int


class Evaluation:
    """An evaluation, set up and checked; :meth:`run` plays it.

    Args:
        config: the settings.
        policies: a sampler per model name, used instead of loading models
            (tests, scripted opponents, models already in memory).

    Raises:
        ValueError: a bad setting, more problems than the task has, or an
            output folder holding another evaluation's results.
        FileNotFoundError: a model folder that does not exist.
    """

    def __init__(self, config: EvalConfig, *, policies: Mapping[str, Policy] | None = None) -> None:
        from baselines.models import resolve_model

        self.config = config
        self.entrants: tuple[Entrant, ...] = parse_entrants(config.models)
        self.names = tuple(e.name for e in self.entrants)
        self.policies = dict(policies) if policies is not None else None
        if self.policies is not None:
            missing = [
                e.name for e in self.entrants if e.name not in self.policies and not e.is_scripted
            ]
            if missing:
                raise ValueError(f"policies has no sampler for the models {missing}")
        else:
            for entrant in self.entrants:
                if not entrant.is_endpoint and not entrant.is_scripted:
                    resolve_model(entrant.model)  # a missing folder fails now
        self.arena = make_arena(
            config.env, config.env_kwargs, config.task, config.seed, config.task_kwargs
        )
        # The scripted players (the reference debater, scripted:SET): refused here
        # (another env, questions without answers, a set the family lacks), before any
        # model is loaded.
        self.scripted: dict[str, Policy] = {
            e.model: self.arena.scripted(e.model, config.seed)
            for e in self.entrants
            if e.is_scripted
        }
        if self.policies is not None:
            for entrant in self.entrants:
                if entrant.is_scripted and entrant.name not in self.policies:
                    self.policies[entrant.name] = self.scripted[entrant.model]
        if self.arena.num_problems is not None and config.problems > self.arena.num_problems:
            raise ValueError(
                f"problems={config.problems}, but task={config.task!r} of env={config.env!r} has "
                f"{self.arena.num_problems}; ask for at most {self.arena.num_problems}, or use "
                "task='arithmetic' (as many problems as asked)"
            )
        mode = config.seating
        if mode == "auto":
            mode = self.arena.default_seating(len(self.names))
        self.seating_mode = mode
        self.schedule = seatings(len(self.names), len(self.arena.agents), mode)
        self.plan = [
            PlannedEpisode(
                episode_id=f"p{problem:05d}-s{s:03d}",
                problem=problem,
                seating=s,
                seats={a: self.names[m] for a, m in zip(self.arena.agents, seating, strict=True)},
                seed=derive_seed(config.seed, problem),
            )
            for problem in range(config.problems)
            for s, seating in enumerate(self.schedule)
        ]
        self.run_dir = RunDirectory(config.output_dir)
        self._check_folder()
        self.log = EpisodeLog(self.run_dir.episodes_dir / RESULTS_FILE)

    @property
    def summary_path(self) -> Path:
        """``OUTPUT_DIR/summary.json``."""
        return self.run_dir.path / SUMMARY_FILE

    def _check_folder(self) -> None:
        """Refuse a folder of a training run or of another evaluation; make it, or fail now."""
        trained = self.run_dir.path / RUN_FILE
        if trained.exists() or self.run_dir.metrics_path.exists():
            raise ValueError(
                f"output_dir {str(self.run_dir.path)!r} is a training run's folder (it holds "
                f"{trained.name if trained.exists() else self.run_dir.metrics_path.name}); an "
                "evaluation would write its config and report over the run's. Evaluate into a "
                f"folder of its own: --output-dir {str(self.run_dir.path / 'eval')!r}"
            )
        self.run_dir.create()  # an output folder that cannot be made fails here, as a bad flag
        path = self.run_dir.config_path
        if not path.exists():
            return
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return  # torn by a kill: the results file's ids still decide
        if not isinstance(before, dict):
            return
        changed = self.config.plan_changes(before)
        if changed:
            now = json.loads(self.config.to_json())
            shown = ", ".join(f"{k}: {before[k]!r} -> {now[k]!r}" for k in changed)
            raise ValueError(
                f"output_dir {str(self.run_dir.path)!r} holds an evaluation with other settings "
                f"({shown}); its episodes would be mixed with these. Use another --output-dir, "
                "or delete that folder"
            )

    # ----------------------------------------------------------------- playing

    def run(self) -> EvalSummary:
        """Play the missing episodes, then summarize every planned one; return the summary."""
        config = self.config
        self.run_dir.create()
        write_atomically(self.run_dir.config_path, config.to_json())
        done = {row["episode_id"]: row for row in self.log.repair()}
        todo = [e for e in self.plan if e.episode_id not in done]
        if todo:
            self._play(todo, already=len(self.plan) - len(todo))
            done = {row["episode_id"]: row for row in self.log.read()}
        lines = [done[e.episode_id] for e in self.plan]
        summary = summarize(
            lines,
            self.names,
            env=config.env,
            baseline=config.baseline_name,
            num_bootstrap=config.num_bootstrap,
            confidence=config.confidence,
            prior_wins=config.prior_wins,
            seed=config.seed,
        )
        summary = with_meter(summary, self._meter())
        write_atomically(self.summary_path, json.dumps(summary.to_json(), indent=2))
        if config.report:
            from baselines.report import write_report

            write_report(self.run_dir.path)
        return summary

    def _meter(self) -> dict[str, dict[str, float]]:
        """Each entrant's numbers from the family's meter (:mod:`baselines.eval.meter`)."""
        config = self.config
        params = SamplingParams(
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=derive_seed(config.seed, 2),
        )
        plan = json.loads(config.to_json())
        return measure_entrants(
            self.arena.family,
            self.names,
            self._load,
            params,
            samples=config.meter_samples,
            seed=config.seed,
            folder=self.run_dir.path,
            settings={k: plan[k] for k in PLAN_FIELDS},
            problems=config.problems,
        )

    def _load(self) -> dict[str, Policy]:
        if self.policies is not None:
            return self.policies
        config = self.config
        device = config.device
        if not all(e.is_endpoint or e.is_scripted for e in self.entrants):
            from baselines.threads import apply_threads

            apply_threads(config.num_threads)
            if device == "auto":
                import torch

                device = "cuda" if torch.cuda.is_available() else "cpu"
        self.policies = build_policies(
            self.entrants,
            device=device,
            api_key_env=config.api_key_env,
            concurrency=config.concurrency,
            retries=config.retries,
            timeout=config.timeout,
            loaded=self.scripted or None,
        )
        return self.policies

    def _play(self, todo: Sequence[PlannedEpisode], *, already: int) -> None:
        config = self.config
        policies = self._load()
        total = len(self.plan)
        start, finished = time.perf_counter(), already
        with phase("episodes", total, "episodes", bar=config.progress) as played:
            played.advance(already)
            for first in range(0, len(todo), config.concurrency):
                chunk = todo[first : first + config.concurrency]
                self.log.append(self._play_chunk(chunk, policies))
                finished += len(chunk)
                played.advance(len(chunk))
                if config.progress and played.bar is None:
                    elapsed = time.perf_counter() - start
                    say(f"episodes {finished}/{total} ({elapsed:.0f} s)")

    def _play_chunk(
        self, chunk: Sequence[PlannedEpisode], policies: Mapping[str, Policy]
    ) -> list[dict[str, Any]]:
        config = self.config
        built = [self.arena.episode(e.problem, e.seed) for e in chunk]
        envs = [env for env, _, _ in built]

        def assign(env_index: int, agent: str) -> Policy:
            return policies[chunk[env_index].seats[agent]]

        params = SamplingParams(
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=derive_seed(config.seed, self.plan.index(chunk[0]), 1),
        )
        results = rollout(
            envs,
            assign,
            params,
            seeds=[seed for _, seed, _ in built],
            options=[options for _, _, options in built],
        )
        lines = []
        for planned, env, result in zip(chunk, envs, results, strict=True):
            lines.append(
                episode_line(
                    result,
                    env,
                    episode_id=planned.episode_id,
                    problem=planned.problem,
                    seating=planned.seating,
                    seats=planned.seats,
                    extras=self.arena.extras(env),
                )
            )
            env.close()
        return lines
