"""League play in the importance-sampling trainer (``--opponents league``, docs/league.md).

:class:`LeaguePlay` samples an iteration's groups against the pool
(:mod:`baselines.league`) and keeps the policies of its members:

* ``latest``: the trainer's own sampler (the learner's current weights);
* snapshots: the trained weights (LoRA merged) saved before the iterations
  the league asks for, as model folders ``OUTPUT_DIR/league/snapshot_NNNNN``.
  In a LoRA run sampled with vLLM each snapshot also keeps its adapter
  (``snapshot_NNNNN/adapter``), and the snapshots are adapters side by side
  on one engine of the base model (:class:`~baselines.samplers.vllm_policy.VLLMAdapter`);
  otherwise each is a frozen transformers copy of the model, loaded once and
  kept while the snapshot is in the pool;
* ``scripted:SET``: the family's scripted players
  (:meth:`~llm_envs.capabilities.ScriptedPlayers.scripted_players`), built afresh each
  iteration with a seed of the iteration (a resumed run plays the same moves);
* ``model:FOLDER``: a model folder (a checkpoint to exploit, for instance),
  loaded like a snapshot, frozen;
* endpoints: an OpenAI-compatible server (:class:`~baselines.samplers.OpenAIPolicy`).

The league's state (pool, ratings) is part of the checkpoint: a resumed run
continues the same league.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baselines.env_families import derive_seed
from baselines.is_trainer.config import LeagueSettings
from baselines.is_trainer.learner import Learner
from baselines.league import League, Opponent, league_batch, parse_anchor
from baselines.league.ratings import LeagueRatings
from baselines.samplers.base import Policy
from baselines.types import TrajectoryGroup
from llm_envs.capabilities import ScriptedPlayers, require

if TYPE_CHECKING:
    from baselines.samplers.vllm_policy import VLLMPolicy

__all__ = ["LeaguePlay", "new_league"]

_MATCH_SEED = 104729  # the matchmaking's draws: apart from the episodes' seeds


def new_league(settings: LeagueSettings, family: Any) -> League:
    """The league a run starts with: its settings, its anchors, no snapshot yet.

    Raises:
        ValueError: a one-seat family, or a ``scripted:SET`` the family does not have.
        FileNotFoundError: a ``model:FOLDER`` anchor whose folder does not exist.
    """
    if len(family.agents) < 2:
        raise ValueError(
            f"--env {family.name} has one seat ({family.agents[0]}): a league needs opponents' "
            "seats; use --opponents mirror"
        )
    scripted = sorted(family.scripted_players(0))
    specs = settings.anchors
    anchors = [parse_anchor(a) for a in specs] if specs is not None else []
    if specs is None:
        anchors = [Opponent(f"scripted:{name}", "scripted", name) for name in scripted]
    for anchor in anchors:
        if anchor.kind == "scripted" and anchor.source not in scripted:
            require(family, ScriptedPlayers, by=f"league anchor {anchor.name!r} is scripted")
            raise ValueError(
                f"league anchor {anchor.name!r}: --env {family.name} has scripted players "
                f"{scripted or 'none'} for these settings"
            )
        if anchor.kind == "model" and not Path(anchor.source).is_dir():
            raise FileNotFoundError(
                f"league anchor {anchor.name!r}: no model folder at {anchor.source!r}; give a "
                "folder from_pretrained loads (a run's final_model)"
            )
    return League(
        matchmaking=settings.matchmaking,
        weighting=settings.pfsp_weighting,
        snapshot_every=settings.snapshot_every,
        max_snapshots=settings.max_snapshots,
        anchors=anchors,
        ratings=LeagueRatings(decay=settings.rating_decay),
    )


class LeaguePlay:
    """An iteration's groups against the league, and the policies of the pool.

    Args:
        learner: the trained policy (its sampler plays ``latest``).
        family: the environment family.
        settings: the league's settings.
        league: a new league (:func:`new_league`), or the one a checkpoint holds
            (``League.to_json``).
        folder: where the snapshots are saved (``OUTPUT_DIR/league``).
        groups_per_batch: groups per iteration.
    """

    def __init__(
        self,
        learner: Learner,
        family: Any,
        settings: LeagueSettings,
        league: League | dict[str, Any],
        *,
        folder: Path,
        groups_per_batch: int,
    ) -> None:
        self.learner = learner
        self.family = family
        self.settings = settings
        self.groups_per_batch = groups_per_batch
        self.league = league if isinstance(league, League) else League.from_json(league)
        self.folder = folder
        self._snapshots: dict[str, Policy] = {}  # loaded snapshot policies, by name
        self._endpoints: dict[str, Policy] = {}
        self._scripted: dict[str, Policy] = {}  # this iteration's scripted players
        self._engine: VLLMPolicy | None = None

    @property
    def adapters(self) -> bool:
        """A LoRA run sampled with vLLM: the snapshots are adapters on one engine of the base."""
        return self.learner.lora and self.learner.sampler.kind == "vllm"

    # ------------------------------------------------------------------ sampling

    def sample(
        self, iteration: int, timings: dict[str, float]
    ) -> tuple[list[TrajectoryGroup], dict[str, float]]:
        """Play this process's share of the iteration's groups; every process's groups, metrics.

        ``timings`` gathers this process's rollout costs.
        """
        learner, seed = self.learner, self.learner.config.seed
        metrics: dict[str, float] = {}
        if self.league.snapshot_due(iteration):
            start = time.perf_counter()
            self._take_snapshot(iteration)
            metrics["time/league_snapshot"] = time.perf_counter() - start
        first = iteration * self.groups_per_batch
        every = list(range(first, first + self.groups_per_batch))
        assigned = self.league.assign(every, derive_seed(seed, _MATCH_SEED, iteration))
        mine = every[learner.rank :: learner.world]
        opponents = assigned[learner.rank :: learner.world]
        groups: list[TrajectoryGroup] = []
        games: list[tuple[str, float]] = []
        if mine:
            plan = league_batch(
                self.family, mine, opponents, derive_seed(seed, iteration), self.settings.group_size
            )
            self._scripted = self._scripted_policies(iteration)
            policy = plan.assignment(learner.sampler.policy, self._policy)
            results = learner.play(plan.batch, policy, iteration, "league play", timings)
            groups = plan.to_groups(results)
            games = plan.games(results)
            learner.save_episodes(iteration, plan.batch.envs)
        games = learner.gather(games)
        self.league.record(games)
        metrics.update(self.league.metrics(assigned, games))
        return learner.gather(groups), metrics

    def state(self) -> dict[str, Any]:
        """The league, for the checkpoint."""
        return self.league.to_json()

    # ------------------------------------------------------------------ the pool's policies

    def _policy(self, name: str) -> Policy:
        opponent = self.league.opponent(name)
        if opponent.kind == "latest":
            return self.learner.sampler.policy
        if opponent.kind == "scripted":
            return self._scripted[opponent.source]
        if opponent.kind == "endpoint":
            if name not in self._endpoints:
                self._endpoints[name] = _endpoint(opponent.source, self.learner.model_path)
            return self._endpoints[name]
        if name not in self._snapshots:
            self._snapshots[name] = (
                self._load_model(opponent)
                if opponent.kind == "model"
                else self._load_snapshot(opponent)
            )
        return self._snapshots[name]

    def _scripted_policies(self, iteration: int) -> dict[str, Policy]:
        from baselines.samplers.scripted import ScriptedPolicy

        seed = derive_seed(self.learner.config.seed, _MATCH_SEED, iteration, 1)
        sets = self.family.scripted_players(seed)
        wanted = {o.source for o in self.league.anchors if o.kind == "scripted"}
        return {
            name: ScriptedPolicy(players, self.learner.tokenizer)
            for name, players in sets.items()
            if name in wanted
        }

    def _take_snapshot(self, iteration: int) -> None:
        """Save the trained weights as the snapshot of ``iteration`` and add it to the pool.

        The snapshot is a model folder (LoRA merged, tokenizer beside it) that
        ``from_pretrained`` and ``llm-envs eval`` load as they stand.
        """
        name = f"snapshot_{iteration:05d}"
        self.learner.save_model_folder(self.folder / name, adapter=self.adapters)
        for gone in self.league.add_snapshot(iteration, f"league/{name}"):
            self._snapshots.pop(gone.name, None)

    def _load_snapshot(self, opponent: Opponent) -> Policy:
        from baselines.samplers import TransformersPolicy

        path = self.folder.parent / opponent.source
        if not (path / "model.safetensors").is_file():
            raise FileNotFoundError(
                f"the league's {opponent.name} has no weights at {path}: the run folder lost "
                "them; start the run in a new output_dir"
            )
        if self.adapters:
            from baselines.samplers.vllm_policy import VLLMAdapter

            assert opponent.iteration is not None
            engine = self._adapter_engine()
            adapter = str(path / "adapter")
            return VLLMAdapter(engine, adapter, opponent.iteration + 1, opponent.name)
        policy = TransformersPolicy.from_pretrained(
            str(path), device=str(self.learner.accelerator.device)
        )
        policy.model.requires_grad_(False)
        return policy

    def _load_model(self, opponent: Opponent) -> Policy:
        """A model anchor: its folder's weights, frozen, sampled in this process."""
        from baselines.samplers import TransformersPolicy

        policy = TransformersPolicy.from_pretrained(
            opponent.source, device=str(self.learner.accelerator.device)
        )
        policy.model.requires_grad_(False)
        return policy

    def _adapter_engine(self) -> VLLMPolicy:
        """The one engine of the base model that the snapshots' adapters share."""
        if self._engine is None:
            self._engine = self.learner.adapter_engine(self.league.max_snapshots)
        return self._engine

    def close(self) -> None:
        """Shut the adapters' engine down, if one started."""
        close = getattr(self._engine, "close", None)
        if close is not None:
            close()


def _endpoint(source: str, default_model: str) -> Policy:
    from baselines.samplers import OpenAIPolicy
    from baselines.samplers.build import served_model_name

    url, _, model = source.partition("#")
    return OpenAIPolicy(url, model or served_model_name(url, default_model))
