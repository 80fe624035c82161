"""One seat of an llm-envs episode as a verl agent loop (``verl.experimental.agent_loop``, 0.9.1).

verl's ``AgentLoopWorker`` runs one agent loop per data set row, as asyncio
tasks, in several workers (Ray actors) at once. :class:`SeatAgentLoop` plays
the row's seat (:mod:`baselines.verl.dataset` writes one row per seat) and
meets the episode's other seats, played by other rows in the same worker or
another, through a rendezvous (:mod:`llm_envs.serve.rendezvous`): the
episode server named by ``server_url``, or, without one, a rendezvous in the
worker's own process (every seat must then run in that worker:
``rollout.agent.num_workers=1``). The episode itself runs on the
rendezvous's hub, with the environment's own turn order and rewards.

One seat's episode is one verl sample, token for token what the model saw
and wrote::

    prompt_ids     the seat's first observation, rendered by verl's Continuous
                   Token builder (the chat template), as sent to the server
    response_ids   action_1 + env_1 + action_2 + ... + action_K
    response_mask  1 on every action token, 0 on env_k
    logprobs       the server's sampling logprobs on actions, 0.0 on env_k
    reward_score   the seat's return: everything the environment paid it

Each ``server_manager.generate`` call gets the whole sequence so far, so
``action_k`` is sampled after exactly ``prompt_ids + response_ids[:start_k]``;
the action tokens and their logprobs are kept as the server returned them,
never re-tokenized. ``env_k`` is verl's own context merge of the seat's next
observation (the messages it adds after the seat's action), preceded by
the tokenizer's end-of-sequence token when the sample stopped without one (a
stop string, the length limit): the template's end of turn, which the model
did not write. The text the environment receives is the sample decoded,
cut after the first of the turn's stop strings (``info["stop"]``, also sent
to the server).

Rules that keep that faithful, each refused with the fix:

* a seat's next observation must extend its previous one plus its action
  (one growing chat; e.g. a debate with ``observation_mode="chat"``);
* no context swap: a turn whose ``info`` holds ``training_messages`` trains
  on another context than it samples from;
* verl must keep the seats of an episode in one batch: ``data.shuffle=False``
  and a ``data.train_batch_size`` that is a multiple of the seats.

A turn whose outcome carries ``loss_weight`` 0 (a masked parse error) keeps
its tokens with mask 0. Once ``response_length`` tokens are spent, the seat
says ``""`` on its remaining turns without sampling (the environment scores
that), so its partners are never left waiting. ``import baselines.verl``
never imports this module: it needs verl.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from baselines.samplers.base import cut_at_stop
from baselines.verl.dataset import AGENT_NAME
from llm_envs.contract import LOSS_WEIGHT, STOP, TRAINING_MESSAGES
from llm_envs.serve.protocol import Message
from llm_envs.serve.rendezvous import (
    Coordinator,
    InProcessCoordinator,
    SeatSession,
    ServerCoordinator,
)

__all__ = ["SeatAgentLoop", "SeatRow", "coordinator_for"]

_COORDINATORS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str | None, int, float], Coordinator]
] = weakref.WeakKeyDictionary()
"""The coordinators of each event loop: one per server URL (None: in-process) and settings."""


def coordinator_for(
    server_url: str | None, *, family_seed: int = 0, seat_timeout: float = 300.0
) -> Coordinator:
    """This event loop's coordinator: an episode server's, or the in-process rendezvous.

    Every agent loop of a worker (one event loop) shares it, so the seats
    played in one worker meet in one in-process rendezvous, and one
    connection pool serves them on a server. Call it inside the loop.
    """
    loop = asyncio.get_running_loop()
    coordinators = _COORDINATORS.setdefault(loop, {})
    key = (server_url, family_seed if server_url is None else 0, seat_timeout)
    coordinator = coordinators.get(key)
    if coordinator is None:
        if server_url is None:
            coordinator = InProcessCoordinator(family_seed=family_seed, seat_timeout=seat_timeout)
        else:
            coordinator = ServerCoordinator(server_url)
        coordinators[key] = coordinator
    return coordinator


@dataclass(frozen=True)
class SeatRow:
    """The ``llm_envs`` column of a row (:func:`baselines.verl.dataset.seat_rows`)."""

    key: str
    seat: str
    seats: tuple[str, ...]
    episode: Mapping[str, Any]
    family_seed: int

    @classmethod
    def parse(cls, text: Any) -> SeatRow:
        """Read the column; a row without it gets the fix.

        Raises:
            ValueError: no ``llm_envs`` column, or not the JSON the data set writes.
        """
        if text is None:
            raise ValueError(
                f"agent loop {AGENT_NAME!r} needs the row's 'llm_envs' column: build the data set "
                "with python -m baselines.verl.dataset"
            )
        try:
            value = json.loads(str(text))
            return cls(
                str(value["key"]),
                str(value["seat"]),
                tuple(value["seats"]),
                dict(value["episode"]),
                int(value["family_seed"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"the row's 'llm_envs' column is not what python -m baselines.verl.dataset writes "
                f"({type(exc).__name__}: {exc}): {str(text)[:200]!r}"
            ) from exc


@register(AGENT_NAME)
class SeatAgentLoop(AgentLoopBase):
    """Play the row's seat of an llm-envs episode; meet its other seats by the row's key.

    verl builds one per row, with its own arguments and, from the agent-loop
    config file (:func:`baselines.verl.dataset.agent_loop_config`):

    Args:
        server_url: the episode server the seats meet on; None for the
            in-process rendezvous (one agent-loop worker only).
        seat_timeout: in-process only: seconds a seat has to act once its turn begins.
        max_turn_tokens: the most tokens sampled for one turn; None: what is left of
            ``response_length``.
        *args, **kwargs: verl's (``AgentLoopBase``).
    """

    def __init__(
        self,
        *args: Any,
        server_url: str | None = None,
        seat_timeout: float = 300.0,
        max_turn_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("name", None)  # the config file's entry name, not an argument
        super().__init__(*args, **kwargs)
        if max_turn_tokens is not None and int(max_turn_tokens) < 1:
            raise ValueError(f"max_turn_tokens must be >= 1 or null, got {max_turn_tokens}")
        self.server_url = server_url or None
        self.seat_timeout = float(seat_timeout)
        self.max_turn_tokens = int(max_turn_tokens) if max_turn_tokens is not None else None
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's seat to the end of its episode; return its tokens and its return."""
        row = SeatRow.parse(kwargs.get("llm_envs"))
        self._check_settings(row)
        coordinator = coordinator_for(
            self.server_url, family_seed=row.family_seed, seat_timeout=self.seat_timeout
        )
        session = await coordinator.meet(
            row.key, row.seat, row.episode, family_seed=row.family_seed
        )
        priority = int(kwargs.get("priority", 0) or 0)  # vLLM's scheduling priority (verl's)
        return await self._play(session, dict(sampling_params), kwargs.get("raw_prompt"), priority)

    # ------------------------------------------------------------------ one seat's episode

    async def _play(
        self,
        session: SeatSession,
        sampling_params: dict[str, Any],
        raw_prompt: Any,
        priority: int = 0,
    ) -> AgentLoopOutput:
        message = await session.message()
        if message["type"] == "end":  # over before the seat's first turn: nothing to train on
            messages = _chat(message.get("observation")) or _plain(raw_prompt or [])
            prompt_ids = await self.ct_build_initial_tokens(messages)
            empty: list[float] | None = [] if sampling_params.get("logprobs") else None
            return self._output(session, prompt_ids, [], [], empty, message, [], 0.0, 0, 0)
        _refuse_error(session, message)
        messages = _chat(message["observation"])
        _refuse_context_swap(session.seat, message["info"])
        runtime = list(await self.ct_build_initial_tokens(messages))
        prompt_length = len(runtime)
        mask: list[int] = []
        logprobs: list[float] | None = [] if sampling_params.get("logprobs") else None
        spans: list[tuple[int, int]] = []  # each action's place in the response
        turn_rewards: list[float] = []
        generating = preempted = 0.0
        while True:
            info = message["info"]
            budget = self.response_length - len(mask)
            text = ""
            if budget > 0:
                stop = [str(s) for s in info.get(STOP) or []]
                limit = min(budget, self.max_turn_tokens or budget)
                params = {**sampling_params, "max_tokens": limit}
                if stop:
                    params["stop"] = stop
                started = time.perf_counter()
                output = await self.server_manager.generate(
                    request_id=uuid4().hex,
                    prompt_ids=list(runtime),
                    sampling_params=params,
                    priority=priority,
                )
                generating += time.perf_counter() - started
                preempted += max(0, output.num_preempted or 0)
                sampled = list(output.token_ids)
                if logprobs is not None and len(output.log_probs or []) != len(sampled):
                    raise RuntimeError(
                        f"the server was asked for sampling logprobs and sent "
                        f"{len(output.log_probs or [])} for {len(sampled)} tokens"
                    )
                merged, mask, logprobs = await self.ct_merge_assistant_token(
                    runtime,
                    sampled,
                    mask,
                    logprobs,
                    assistant_logprobs=list(output.log_probs) if logprobs is not None else None,
                )
                runtime = list(merged.token_ids)
                spans.append((len(mask) - len(sampled), len(mask)))
                decoded = self.tokenizer.decode(sampled, skip_special_tokens=True)
                text, _ = cut_at_stop(decoded, stop)
            else:
                spans.append((len(mask), len(mask)))  # nothing sampled: no room left
            await session.act(text, int(message["turn"]))
            acted = [*messages, {"role": "assistant", "content": text}]
            message = await session.message()
            _refuse_error(session, message)
            turn_rewards.append(float(message.get("reward") or 0.0))
            if message.get("info", {}).get(LOSS_WEIGHT, 1.0) == 0:
                start, end = spans[-1]
                mask[start:end] = [0] * (end - start)
            if message["type"] == "end":
                messages = acted
                break
            updated = _chat(message["observation"])
            _refuse_context_swap(session.seat, message["info"])
            if updated[: len(acted)] != acted:
                raise ValueError(
                    f"{session.seat}'s observation in episode {session.episode} does not extend "
                    "its previous observation and its action: one seat's episode is trained as one "
                    "growing chat here; serve the env so that each observation extends the last "
                    "(for debate: env_kwargs observation_mode='chat')"
                )
            eos = self.tokenizer.eos_token_id
            if budget > 0 and eos is not None and runtime[-1:] != [eos]:
                # The sample stopped short of the template's end of turn: close it as context.
                runtime.append(int(eos))
                mask.append(0)
                if logprobs is not None:
                    logprobs.append(0.0)
            merged, mask, logprobs = await self.ct_merge_context_msg(
                acted, updated, runtime, mask, logprobs
            )
            runtime = list(merged.token_ids)
            messages = updated
        prompt_ids = runtime[: len(runtime) - len(mask)]
        if len(prompt_ids) != prompt_length:
            raise RuntimeError(
                f"verl's token merge changed {session.seat}'s prompt ({prompt_length} -> "
                f"{len(prompt_ids)} tokens): this model's chat template is not supported here"
            )
        return self._output(
            session,
            prompt_ids,
            runtime[len(prompt_ids) :],
            mask,
            logprobs,
            message,
            turn_rewards,
            generating,
            int(preempted),
            len(messages),
        )

    def _output(
        self,
        session: SeatSession,
        prompt_ids: list[int],
        response_ids: list[int],
        mask: list[int],
        logprobs: list[float] | None,
        end: Message,
        turn_rewards: list[float],
        generating: float,
        preempted: int,
        num_turns: int,
    ) -> AgentLoopOutput:
        length = self.response_length
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids),
            response_ids=response_ids[:length],
            response_mask=mask[:length],
            response_logprobs=logprobs[:length] if logprobs is not None else None,
            reward_score=float(end["return"]),
            num_turns=num_turns,
            metrics=AgentLoopMetrics(generate_sequences=generating, num_preempted=preempted),
            extra_fields={
                "turn_scores": turn_rewards,
                "tool_rewards": [],
                "llm_envs_episode": session.episode,
                "llm_envs_seat": session.seat,
            },
        )

    def _check_settings(self, row: SeatRow) -> None:
        """Refuse verl settings under which the seats of an episode cannot meet."""
        config = self.config
        workers = _get(config, "actor_rollout_ref.rollout.agent.num_workers", 1)
        if self.server_url is None and workers != 1:
            raise ValueError(
                f"the in-process rendezvous needs every seat in one agent-loop worker, and "
                f"actor_rollout_ref.rollout.agent.num_workers is {workers}: set it to 1, or "
                "start an episode server and give the agent loop its server_url"
            )
        if _get(config, "data.shuffle", False):
            raise ValueError(
                "data.shuffle=True scatters the seats of an episode over batches, where they wait "
                "for each other until the seat timeout: set data.shuffle=False (the data set is "
                "shuffled by episode when it is built)"
            )
        for name in ("data.train_batch_size", "data.gen_batch_size", "data.val_batch_size"):
            batch = _get(config, name, None)
            if batch is not None and int(batch) % len(row.seats):
                raise ValueError(
                    f"{name}={batch} splits episodes of {len(row.seats)} seats over batches: "
                    f"make it a multiple of {len(row.seats)}"
                )
        if _get(config, "data.val_batch_size", None) and _get(
            config, "data.validation_shuffle", False
        ):
            raise ValueError(
                "data.validation_shuffle=True with a data.val_batch_size scatters an episode's "
                "seats over validation batches: set data.validation_shuffle=False"
            )
        mode = _get(config, "trainer.v1.trainer_mode", "sync")
        if _get(config, "trainer.use_v1", False) and mode != "sync":
            raise ValueError(
                f"trainer.v1.trainer_mode={mode} fetches rows one at a time, so the seats of an "
                "episode may never all be started: use trainer.v1.trainer_mode=sync"
            )


def _get(config: Any, path: str, default: Any) -> Any:
    value = config
    for part in path.split("."):
        getter = getattr(value, "get", None)
        if getter is None:
            return default
        value = getter(part)
        if value is None:
            return default
    return value


def _plain(messages: Any) -> list[dict[str, str]]:
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]


def _chat(observation: Any) -> list[dict[str, str]]:
    """An observation's chat as plain ``{"role", "content"}`` dicts ([] for none)."""
    if observation is None:
        return []
    if not isinstance(observation, Mapping) or not isinstance(observation.get("messages"), list):
        raise TypeError(
            "a seat's observation must be an llm-envs chat, {'messages': [...]}, got "
            f"{type(observation).__name__}"
        )
    return _plain(observation["messages"])


def _refuse_context_swap(seat: str, info: Mapping[str, Any]) -> None:
    if info.get(TRAINING_MESSAGES) is not None:
        raise ValueError(
            f"{seat}'s turn trains on another context than it samples from (info "
            f"{TRAINING_MESSAGES!r}): a verl sample trains on what it sampled; use the "
            "importance-sampling trainer (python -m baselines.is_trainer) for this env"
        )


def _refuse_error(session: SeatSession, message: Message) -> None:
    if message["type"] == "error":
        raise RuntimeError(
            f"{session.seat} of episode {session.episode}: {message.get('detail', message)}"
        )
