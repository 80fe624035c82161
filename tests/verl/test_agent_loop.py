"""The verl agent loop, driven by verl's own ``AgentLoopWorker`` against a tiny token server.

verl's classes run as its trainer runs them, less Ray and GPUs: the data set
rows written by :mod:`baselines.verl.dataset` are read by verl's
``RLHFDataset``, batched by its ``collate_fn`` into a ``DataProto``, repeated
``rollout.n`` times, and played by ``AgentLoopWorker.generate_sequences`` (each
row an agent loop built from the agent-loop config file by hydra, its output
padded and batched by verl). The server manager is a stand-in with verl's
``generate`` signature that samples with a tiny random Qwen2 model through
transformers and returns the tokens and their logprobs as verl's
``TokenOutput``. Seats ``agent_0`` and ``agent_1`` answer in the debate's format
and vote against ``agent_2`` (forced decoding: the tokens of a fixed answer,
with the model's own logprobs, ending at the debate's stop string), so the
rewards are not all zero; ``agent_2`` is sampled freely (broken answers, which
the debate masks from the loss).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="verl has its own environment: .ci/verl.sh runs tests/verl")

import httpx
import numpy as np
import torch
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker, DictConfigWrap
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.replica import TokenOutput

from baselines.models import tiny_checkpoint
from baselines.samplers.base import cut_at_stop
from baselines.verl.agent_loop import SeatAgentLoop, coordinator_for
from baselines.verl.dataset import VerlDataConfig, seat_rows, write
from tests.verl.conftest import (
    ARITHMETIC,
    DEBATE,
    VOTES,
    answer,
    rendezvous_server,
    replay,
    texts_by_seat,
)

pytestmark = pytest.mark.slow

PROMPT_LENGTH = 1536
RESPONSE_LENGTH = 768
TURN_TOKENS = 64


class TokenServer:
    """verl's server manager as an agent loop calls it: ``generate`` with a transformers model.

    A prompt whose last words name Agent 0 or Agent 1 gets that agent's
    :func:`answer` (forced decoding: the model's own logprobs of its tokens);
    any other is sampled at the request's temperature, up to ``max_tokens``,
    the end-of-sequence token or a stop string. Every call is kept in :attr:`calls`.
    """

    def __init__(self, model_dir: Path, seed: int = 0) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        torch.set_num_threads(1)  # one sample at a time; the workers' threads share the cores
        self.generator = torch.Generator().manual_seed(seed)
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(1)

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self.pool, self._generate, list(prompt_ids), dict(sampling_params)
        )

    def _generate(self, prompt_ids: list[int], params: dict[str, Any]) -> TokenOutput:
        limit = int(params["max_tokens"])
        stop = list(params.get("stop") or [])
        temperature = float(params.get("temperature") or 1.0)
        agent = re.findall(r"You are Agent (\d+)\.", self.tokenizer.decode(prompt_ids))[-1]
        with self.lock, torch.no_grad():
            if int(agent) in VOTES:
                text = answer(int(agent))
                tokens = self.tokenizer.encode(text, add_special_tokens=False)[:limit]
                logits = self.model(torch.tensor([prompt_ids + tokens])).logits[0]
                steps = torch.log_softmax(logits[len(prompt_ids) - 1 : -1] / temperature, -1)
                logprobs = [float(steps[i, t]) for i, t in enumerate(tokens)]
            else:
                tokens, logprobs = self._sample(prompt_ids, limit, stop, temperature)
            self.calls.append({"prompt_ids": prompt_ids, "tokens": tokens, "logprobs": logprobs})
        return TokenOutput(token_ids=tokens, log_probs=logprobs, stop_reason="completed")

    def _sample(
        self, prompt_ids: list[int], limit: int, stop: Sequence[str], temperature: float
    ) -> tuple[list[int], list[float]]:
        out = self.model(torch.tensor([prompt_ids]), use_cache=True)
        tokens: list[int] = []
        logprobs: list[float] = []
        while True:
            step = torch.log_softmax(out.logits[0, -1] / temperature, -1)
            token = int(torch.multinomial(step.exp(), 1, generator=self.generator))
            tokens.append(token)
            logprobs.append(float(step[token]))
            text = self.tokenizer.decode(tokens)
            done = token == self.tokenizer.eos_token_id or any(s in text for s in stop)
            if done or len(tokens) >= limit:
                return tokens, logprobs
            out = self.model(
                torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True
            )


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture
def server(tiny_model_dir: Path) -> TokenServer:
    return TokenServer(tiny_model_dir)


def verl_config(model_dir: Path, loops: Path, *, num_workers: int = 1, **data: Any) -> Any:
    """Verl's own trainer defaults, with the rollout and data settings of this recipe."""
    import verl

    defaults = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    overrides = {
        "actor_rollout_ref": {
            "model": {"path": str(model_dir)},
            "rollout": {
                "name": "vllm",
                "prompt_length": PROMPT_LENGTH,
                "response_length": RESPONSE_LENGTH,
                "calculate_log_probs": True,
                "temperature": 1.0,
                "n": 2,
                "agent": {"num_workers": num_workers, "agent_loop_config_path": str(loops)},
            },
        },
        "data": {
            "shuffle": False,
            "train_batch_size": 6,
            "max_prompt_length": PROMPT_LENGTH,
            "max_response_length": RESPONSE_LENGTH,
            "filter_overlong_prompts": False,
            "return_raw_chat": True,
            **data,
        },
    }
    return OmegaConf.merge(OmegaConf.load(defaults), OmegaConf.create(overrides))


def data_set(tmp_path: Path, server_url: str | None, problems: int) -> tuple[Path, Path]:
    config = VerlDataConfig(
        env="debate",
        env_kwargs=DEBATE,
        task="arithmetic",
        task_kwargs=ARITHMETIC,
        problems=problems,
        output_dir=str(tmp_path),
        server_url=server_url,
        max_turn_tokens=TURN_TOKENS,
    )
    return write(config)


def batch_of(data: Path, config: Any, tokenizer: Any) -> DataProto:
    """What verl's PPO trainer hands its rollout: the rows, a uid each, repeated ``rollout.n``."""
    dataset = RLHFDataset(str(data), tokenizer, config.data)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    batch.non_tensor_batch["uid"] = np.array([f"row-{i}" for i in range(len(batch))], object)
    return batch.repeat(repeat_times=config.actor_rollout_ref.rollout.n, interleave=True)


def rollout_in_process(data: Path, config: Any, server: Any) -> tuple[DataProto, dict[str, Any]]:
    """One batch through verl's ``AgentLoopWorker``; the batch and each episode's record."""

    async def rollout() -> tuple[DataProto, dict[str, Any]]:
        worker = AgentLoopWorker(config, server)
        output = await worker.generate_sequences(batch_of(data, config, server.tokenizer))
        coordinator = coordinator_for(None, family_seed=0)
        episodes = set(output.non_tensor_batch["llm_envs_episode"])
        records = {e: coordinator.record(e) for e in episodes}  # type: ignore[attr-defined]
        await coordinator.close()
        return output, records

    return asyncio.run(rollout())


def samples(output: DataProto) -> list[dict[str, Any]]:
    """Each output row unpadded: prompt, response, mask, logprobs, reward, seat, episode."""
    prompt_width = output.batch["prompts"].shape[1]
    found = []
    for i in range(len(output)):
        attention = output.batch["attention_mask"][i]
        length = int(attention[prompt_width:].sum())
        prompt = output.batch["prompts"][i][attention[:prompt_width].bool()].tolist()
        found.append(
            {
                "prompt": prompt,
                "response": output.batch["responses"][i, :length].tolist(),
                "mask": output.batch["response_mask"][i, :length].tolist(),
                "logprobs": output.batch["rollout_log_probs"][i, :length].tolist(),
                "padding": output.batch["response_mask"][i, length:].tolist(),
                "reward": float(output.batch["rm_scores"][i].sum()),
                "seat": output.non_tensor_batch["llm_envs_seat"][i],
                "episode": output.non_tensor_batch["llm_envs_episode"][i],
                "row": json.loads(output.non_tensor_batch["llm_envs"][i]),
                "uid": output.non_tensor_batch["uid"][i],
            }
        )
    return found


def check_tokens(
    sample: Mapping[str, Any], record: Mapping[str, Any], calls: list[dict[str, Any]], tokenizer
) -> None:
    """One seat's sample is the record's episode, token for token (see the module docstring)."""
    seat = sample["seat"]
    turns = [t for t in record["turns"] if t["agent"] == seat]
    rendered = tokenizer.apply_chat_template(
        turns[0]["prompt"], add_generation_prompt=True, tokenize=False
    )
    assert tokenizer.decode(sample["prompt"]) == rendered
    sequence = sample["prompt"] + sample["response"]
    start = len(sample["prompt"])
    spans = sorted(
        {
            (len(c["prompt_ids"]) - start, len(c["prompt_ids"]) - start + len(c["tokens"])): c
            for c in calls
            if len(c["prompt_ids"]) >= start
            and sequence[: len(c["prompt_ids"]) + len(c["tokens"])] == c["prompt_ids"] + c["tokens"]
        }.items()
    )
    assert len(spans) == len(turns), f"{seat}: {len(spans)} sampled turns, {len(turns)} recorded"
    owned = np.zeros(len(sample["response"]), bool)
    for ((begin, end), call), turn in zip(spans, turns, strict=True):
        assert owned[begin:end].sum() == 0
        owned[begin:end] = True
        weight = 0 if turn["details"]["parse_error"] else 1
        assert sample["mask"][begin:end] == [weight] * (end - begin)
        assert sample["logprobs"][begin:end] == pytest.approx(call["logprobs"], abs=1e-5)
        text = tokenizer.decode(call["tokens"], skip_special_tokens=True)
        assert cut_at_stop(text, ["</consensus_reason>"])[0] == turn["text"]
    assert not any(m for m, mine in zip(sample["mask"], owned, strict=True) if not mine)
    assert not any(lp for lp, mine in zip(sample["logprobs"], owned, strict=True) if not mine)
    assert set(sample["padding"]) <= {0}
    # Between two turns: the environment's next message, as the chat template writes it.
    for ((_, end), _), ((begin, _), _), turn in zip(spans, spans[1:], turns[1:], strict=False):
        between = tokenizer.decode(sample["response"][end:begin])
        assert turn["prompt"][-1]["content"] in between
        assert between.endswith("<|im_start|>assistant\n")


def test_three_seats_meet_in_process_and_each_sample_is_its_episode(
    tmp_path, server, tiny_model_dir
):
    data, loops = data_set(tmp_path, None, problems=1)
    config = verl_config(tiny_model_dir, loops)

    output, records = rollout_in_process(data, config, server)
    found = samples(output)
    assert len(found) == 6 and len(records) == 2  # 3 seats x rollout.n = 2 episodes
    for sample in found:
        entry = records[sample["episode"]]
        assert entry["status"] == "finished" and entry["abandoned"] == []
        check_tokens(sample, entry["record"], server.calls, server.tokenizer)
        local = replay(sample["row"]["episode"], texts_by_seat(entry["record"]))
        assert sample["reward"] == pytest.approx(entry["returns"][sample["seat"]])
        assert sample["reward"] == pytest.approx(local[sample["seat"]])
    by_episode: dict[str, list[str]] = {}
    for sample in found:
        by_episode.setdefault(sample["episode"], []).append(sample["seat"])
    assert all(sorted(s) == ["agent_0", "agent_1", "agent_2"] for s in by_episode.values())
    turns = [t for entry in records.values() for t in entry["record"]["turns"]]
    assert {bool(t["details"]["parse_error"]) for t in turns} == {False, True}  # both kinds
    # agent_0 and agent_1 vote against agent_2, whose broken answers cast no vote: win rates.
    assert {(s["seat"], s["reward"]) for s in found} == {
        ("agent_0", 1.0),
        ("agent_1", 1.0),
        ("agent_2", 0.0),
    }


def test_seats_in_three_workers_meet_on_the_episode_server(tmp_path, server, tiny_model_dir):
    with rendezvous_server() as url:
        data, loops = data_set(tmp_path, url, problems=1)
        config = verl_config(tiny_model_dir, loops, num_workers=3)
        batch = batch_of(data, config, server.tokenizer)  # 3 seats x n = 2: two episodes
        chunks = batch.chunk(3)  # as AgentLoopManager splits it: a seat's copies per worker

        def worker(chunk: DataProto) -> DataProto:
            async def run() -> DataProto:
                return await AgentLoopWorker(config, server).generate_sequences(chunk)

            return asyncio.run(run())

        with ThreadPoolExecutor(3) as pool:
            output = DataProto.concat(list(pool.map(worker, chunks)))
        found = samples(output)
        records = {
            e: httpx.get(f"{url}/episodes/{e}").json() for e in {s["episode"] for s in found}
        }
    assert len(found) == 6 and len(records) == 2
    workers_of: dict[str, set[int]] = {}
    for index, sample in enumerate(found):
        workers_of.setdefault(sample["episode"], set()).add(index // 2)
        entry = records[sample["episode"]]
        check_tokens(sample, entry["record"], server.calls, server.tokenizer)
        local = replay(sample["row"]["episode"], texts_by_seat(entry["record"]))
        assert sample["reward"] == pytest.approx(entry["returns"][sample["seat"]])
        assert sample["reward"] == pytest.approx(local[sample["seat"]])
    assert all(len(w) == 3 for w in workers_of.values())  # each seat of it in another worker


@pytest.mark.parametrize(
    ("server_url", "settings", "words"),
    [
        (None, {"num_workers": 2}, "num_workers is 2"),
        ("http://127.0.0.1:9", {"shuffle": True}, "data.shuffle=False"),
        ("http://127.0.0.1:9", {"train_batch_size": 8}, "multiple of 3"),
    ],
)
def test_settings_that_keep_seats_apart_are_refused(
    tmp_path, server, tiny_model_dir, server_url, settings, words
):
    _, loops = data_set(tmp_path, server_url, problems=1)
    workers = settings.pop("num_workers", 1)
    config = verl_config(tiny_model_dir, loops, num_workers=workers, **settings)
    row = seat_rows(VerlDataConfig(env="debate", env_kwargs=DEBATE, task="arithmetic",
                                   task_kwargs=ARITHMETIC, problems=1))[0]  # fmt: skip

    async def run() -> None:
        loop = SeatAgentLoop(
            trainer_config=DictConfigWrap(config),
            server_manager=server,
            tokenizer=server.tokenizer,
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(config.data),
            server_url=server_url,
        )
        await loop.run({"temperature": 1.0}, **row)

    with pytest.raises(ValueError, match=words):
        asyncio.run(run())
