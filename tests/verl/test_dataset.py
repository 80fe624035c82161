"""The verl data set: one row per (problem, episode, seat), an episode's seats together.

No verl needed: the rows are plain data (``test_agent_loop.py`` reads them with
verl's own ``RLHFDataset``).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from baselines.verl.dataset import (
    AGENT_NAME,
    VerlDataConfig,
    agent_loop_config,
    main,
    seat_rows,
)
from tests.verl.conftest import ARITHMETIC, DEBATE

CONFIG = VerlDataConfig(
    env="debate",
    env_kwargs=DEBATE,
    task="arithmetic",
    task_kwargs=ARITHMETIC,
    problems=4,
    first_problem=2,
    episodes_per_problem=2,
    seed=9,
)


def spec(row):
    return json.loads(row["llm_envs"])


def test_a_row_per_problem_episode_and_seat_each_episode_s_seats_in_a_block():
    rows = seat_rows(CONFIG)
    assert len(rows) == 4 * 2 * 3
    blocks = [rows[i : i + 3] for i in range(0, len(rows), 3)]
    for block in blocks:
        assert [spec(r)["seat"] for r in block] == ["agent_0", "agent_1", "agent_2"]
        assert len({spec(r)["key"] for r in block}) == 1
        assert all(spec(r)["seats"] == ["agent_0", "agent_1", "agent_2"] for r in block)
    keys = [spec(block[0])["key"] for block in blocks]
    assert len(set(keys)) == len(keys) == 8
    problems = Counter(spec(block[0])["episode"]["problem"] for block in blocks)
    assert problems == {2: 2, 3: 2, 4: 2, 5: 2}
    assert [r["extra_info"]["index"] for r in rows] == list(range(len(rows)))


def test_the_uid_groups_the_episodes_of_one_problem_per_seat():
    rows = seat_rows(CONFIG)
    groups: dict[str, set[tuple[int, str]]] = {}
    for row in rows:
        info = row["extra_info"]
        groups.setdefault(row["uid"], set()).add((info["problem"], info["seat"]))
    assert len(groups) == 4 * 3
    assert all(len(members) == 1 for members in groups.values())
    assert Counter(row["uid"] for row in rows) == dict.fromkeys(groups, 2)


def test_a_row_names_the_episode_the_server_plays_and_the_agent_loop():
    row = seat_rows(CONFIG)[0]
    episode = spec(row)["episode"]
    assert episode["env"] == "debate" and episode["env_kwargs"] == DEBATE
    assert episode["task"] == "arithmetic" and episode["task_kwargs"] == ARITHMETIC
    assert row["agent_name"] == AGENT_NAME
    assert row["data_source"] == "llm_envs/debate"
    assert row["prompt"][0]["role"] == "user"
    assert spec(row)["family_seed"] == 0


def test_the_order_is_seeded_and_can_be_kept():
    shuffled = [spec(r)["key"] for r in seat_rows(CONFIG)]
    assert shuffled == [spec(r)["key"] for r in seat_rows(CONFIG)]
    kept = VerlDataConfig(**{**CONFIG.__dict__, "shuffle": False})
    ordered = [spec(r)["episode"]["problem"] for r in seat_rows(kept)]
    assert ordered == sorted(ordered) and shuffled != [spec(r)["key"] for r in seat_rows(kept)]


def test_other_settings_never_share_a_key():
    other = VerlDataConfig(**{**CONFIG.__dict__, "env_kwargs": {**DEBATE, "max_rounds": 1}})
    assert not {spec(r)["key"] for r in seat_rows(CONFIG)} & {
        spec(r)["key"] for r in seat_rows(other)
    }


def test_more_problems_than_the_family_has_are_refused():
    config = VerlDataConfig(env="debate", env_kwargs={"num_agents": 3}, problems=1000)
    with pytest.raises(ValueError, match="problems"):
        seat_rows(config)


def test_the_command_writes_the_rows_and_the_agent_loop_config(tmp_path, capsys):
    from datasets import Dataset

    argv = [
        "--env", "debate",
        "--env-kwargs", json.dumps(DEBATE),
        "--task", "arithmetic",
        "--task-kwargs", json.dumps(ARITHMETIC),
        "--problems", "2",
        "--output-dir", str(tmp_path),
        "--server-url", "http://127.0.0.1:8000",
    ]  # fmt: skip
    assert main(argv) == 0
    data = Dataset.from_parquet(str(tmp_path / "train.parquet"))
    assert len(data) == 6 and data[0]["agent_name"] == AGENT_NAME
    assert data[0]["llm_envs"] == seat_rows(VerlDataConfig(
        env="debate", env_kwargs=DEBATE, task="arithmetic", task_kwargs=ARITHMETIC, problems=2
    ))[0]["llm_envs"]  # fmt: skip
    assert (tmp_path / "agent_loop.yaml").read_text() == agent_loop_config("http://127.0.0.1:8000")
    assert "data.train_batch_size a multiple of 3" in capsys.readouterr().out
