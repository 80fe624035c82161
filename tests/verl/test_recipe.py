"""The commands of ``docs/verl.md`` are what they say: flags that exist, a config verl accepts.

The data set commands need no verl; the training command is composed by
hydra from verl's own config files and checked by verl's ``validate_config``
(on CPU, nothing starts), then by the agent loop's own settings check.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from baselines.cli import parse_config
from baselines.verl.dataset import VerlDataConfig, agent_loop_config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "verl.md"
SEATS = ("agent_0", "agent_1", "agent_2")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), re.S)


def commands(prefix: str) -> list[list[str]]:
    """Every command of the page's bash blocks that starts with ``prefix``, as its words."""
    found = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].split("&")[0].strip()
            if line.startswith(prefix):
                found.append(shlex.split(line)[len(shlex.split(prefix)) :])
    return found


def test_the_data_set_commands_parse():
    made = [
        parse_config(VerlDataConfig, words)
        for words in commands("python -m baselines.verl.dataset")
    ]
    assert [config.split for config in made] == ["train", "val"]
    train, val = made
    assert train.first_problem + train.problems <= val.first_problem  # kept apart
    assert train.env_kwargs == val.env_kwargs and train.server_url == val.server_url


def test_the_agent_loop_file_shown_is_the_one_written():
    yaml = pytest.importorskip("yaml")
    shown = yaml.safe_load(blocks("yaml")[0])
    (train, _) = [
        parse_config(VerlDataConfig, w) for w in commands("python -m baselines.verl.dataset")
    ]
    written = agent_loop_config(train.server_url, train.seat_timeout, train.max_turn_tokens)
    assert shown == yaml.safe_load(written)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {  # several nodes, as the page says
            "trainer.nnodes": "2",
            "data.train_batch_size": "192",
            "actor_rollout_ref.rollout.agent.num_workers": "16",
        },
    ],
    ids=["one node", "two nodes"],
)
def test_the_training_command_is_a_valid_verl_config(changes):
    pytest.importorskip("verl", reason="verl has its own environment: .ci/verl.sh runs tests/verl")
    import verl
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from baselines.verl.agent_loop import SeatAgentLoop, SeatRow

    [words] = commands("python -m verl.trainer.main_ppo")
    overrides = dict(word.split("=", 1) for word in words)
    assert set(changes) <= set(overrides)
    overrides.update(changes)
    folder = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(folder), version_base=None):
        config = compose("ppo_trainer", overrides=[f"{k}={v}" for k, v in overrides.items()])
    with pytest.warns(UserWarning, match="Disabled critic"):  # GRPO needs none
        validate_config(config, need_reference_policy(config), need_critic(config))
    row = SeatRow("key", "agent_0", SEATS, {}, 0)
    loop = SimpleNamespace(config=config, server_url="http://127.0.0.1:8000")
    SeatAgentLoop._check_settings(loop, row)  # type: ignore[arg-type]
