"""A family from a package of its own in the verl bridge, by its name alone.

``.ci/verl.sh`` installs into verl's environment the package that ``llm-envs
new-env guessnum`` writes (a two-seat guessing race, declared in the
``llm_envs.families`` entry-point group); nothing here registers it. The data
set command writes its rows, and verl's own ``AgentLoopWorker`` plays them in
process (as ``test_agent_loop.py`` does the debate), the tiny model sampling
every seat.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("guessnum", reason="the scaffold's package: .ci/verl.sh installs it")
pytest.importorskip("verl", reason="verl has its own environment: .ci/verl.sh runs tests/verl")

import torch
from verl.workers.rollout.replica import TokenOutput

from baselines.models import tiny_checkpoint
from baselines.verl.dataset import VerlDataConfig, main, write
from tests.verl.test_agent_loop import TokenServer, rollout_in_process, samples, verl_config

pytestmark = pytest.mark.slow

ONE_ROUND = {"max_rounds": 1}  # a guess each: two turns an episode


class Sampler(TokenServer):
    """The tiny model samples every turn (the debate's forced answers have no place here)."""

    def _generate(self, prompt_ids: list[int], params: dict[str, Any]) -> TokenOutput:
        with self.lock, torch.no_grad():
            tokens, logprobs = self._sample(
                prompt_ids,
                int(params["max_tokens"]),
                list(params.get("stop") or []),
                float(params.get("temperature") or 1.0),
            )
            self.calls.append({"prompt_ids": prompt_ids, "tokens": tokens, "logprobs": logprobs})
        return TokenOutput(token_ids=tokens, log_probs=logprobs, stop_reason="completed")


def test_the_data_set_command_takes_the_installed_family_by_name(tmp_path, capsys):
    argv = ["--env", "guessnum", "--env-kwargs", json.dumps(ONE_ROUND), "--problems", "3"]
    assert main([*argv, "--output-dir", str(tmp_path)]) == 0
    assert "(3 episodes of 2 seats)" in capsys.readouterr().out
    (data,) = tmp_path.glob("*.parquet")
    import pandas

    specs = [json.loads(row) for row in pandas.read_parquet(data)["llm_envs"]]
    assert {s["episode"]["env"] for s in specs} == {"guessnum"}
    assert sorted({s["seat"] for s in specs}) == ["agent_0", "agent_1"]


def test_verl_s_agent_loop_plays_its_seats_in_process(tmp_path: Path):
    model = tiny_checkpoint(tmp_path / "tiny")
    config = VerlDataConfig(
        env="guessnum",
        env_kwargs=ONE_ROUND,
        problems=1,
        output_dir=str(tmp_path),
        max_turn_tokens=16,
    )
    data, loops = write(config)
    server = Sampler(model)
    verl = verl_config(model, loops)

    output, records = rollout_in_process(data, verl, server)
    found = samples(output)
    assert len(found) == 4 and len(records) == 2  # 2 seats x rollout.n = 2 episodes
    for sample in found:
        entry = records[sample["episode"]]
        assert entry["status"] == "finished" and entry["abandoned"] == []
        assert sample["row"]["episode"]["env"] == "guessnum"
        assert sample["reward"] == pytest.approx(entry["returns"][sample["seat"]])
        # The seat's one turn is the tiny model's text; a lost turn costs the format penalty.
        (turn,) = [t for t in entry["record"]["turns"] if t["agent"] == sample["seat"]]
        assert isinstance(turn["text"], str)
    assert sorted(s["seat"] for s in found) == ["agent_0", "agent_0", "agent_1", "agent_1"]
