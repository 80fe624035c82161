"""llm-envs seats as verifiers environments, run by verifiers' own ``vf-eval``.

Each case writes an eval config (TOML) for the plugin
:mod:`llm_envs.bridges.verifiers` and runs verifiers' command-line
evaluation, ``vf-eval @ eval.toml``, against a tiny random model that really
generates (``tests/verifiers/model_server.py``, ``transformers``' ``generate``
behind an OpenAI-compatible endpoint on 127.0.0.1); the four runs start
together. Then, from the ``traces.jsonl`` verifiers wrote, for every seat the
model played:

* its texts are texts the server generated;
* its reward is the return of the same episode played here through
  :class:`~llm_envs.seats.SeatView` with those texts (the other seats:
  the family's reference players, or the other traces' texts);
* each request the server got for it is the conversation the adapter
  promises: the environment's observation where its chat grows, the model's
  history plus the new messages where it rebuilds its prompt.

The model server needs torch and transformers, which the verifiers
virtualenv leaves out (``.ci/verifiers.sh``): it runs under the interpreter
named by ``LLM_ENVS_SERVER_PYTHON``, else this one if it has them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "verifiers.v1",
    reason="verifiers 0.4 is not installed here: these tests run in the verifiers "
    "virtualenv that .ci/verifiers.sh builds",
)
tomli_w = pytest.importorskip("tomli_w", reason="tomli_w comes with verifiers 0.4")

from llm_envs.bridges.verifiers import PLUGIN, REWARD, write_plugin  # noqa: E402
from llm_envs.registration import make_family  # noqa: E402
from llm_envs.seats import family_seat  # noqa: E402
from llm_envs.seeding import derive_seed  # noqa: E402
from tests.loopback import wait_for_announcement  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SEED = 3

CASES = {
    # A debate seat against the reference debaters; parse errors masked, so the
    # debate goes on for both rounds whatever the random model writes, and the
    # reference debaters' votes against its answers cost it (win minus loss).
    "debate-reference": {
        "env": "debate",
        "env_kwargs": {
            "num_agents": 3,
            "max_rounds": 2,
            "on_parse_error": "mask",
            "reward": "win_minus_loss",
        },
        "env_task": "arithmetic",
        "seat": "agent_1",
        "others": "reference",
    },
    # Every seat is the model: verifiers' multi-agent API, one trace per seat;
    # chat observations, so each request is the seat's observation itself.
    "debate-model": {
        "env": "debate",
        "env_kwargs": {
            "num_agents": 3,
            "max_rounds": 2,
            "on_parse_error": "mask",
            "observation_mode": "chat",
        },
        "env_task": "arithmetic",
        "seat": "agent_0",
        "others": "model",
    },
    # TextArena's Tic Tac Toe against the minimax reference player.
    "tictactoe-reference": {
        "env": "textarena",
        "env_kwargs": {"game": "TicTacToe-v0"},
        "env_task": "default",
        "seat": "agent_0",
        "others": "reference",
    },
    # Both seats are the model. X's moves are invalid, so X loses (-1) and O wins
    # without a move of its own: a seat whose interaction never takes a turn.
    "tictactoe-model": {
        "env": "textarena",
        "env_kwargs": {"game": "TicTacToe-v0"},
        "env_task": "default",
        "seat": "agent_0",
        "others": "model",
    },
    # A family from a package of its own (the one llm-envs new-env writes, which
    # .ci/verifiers.sh installs), by its name alone, against its bisecting player.
    "guessnum-reference": {
        "env": "guessnum",
        "env_kwargs": {"max_rounds": 2},
        "env_task": "default",
        "seat": "agent_1",
        "others": "reference",
    },
}
NEEDS = {
    "tictactoe-reference": "textarena",
    "tictactoe-model": "textarena",
    "guessnum-reference": "guessnum",
}
REBUILT_PROMPTS = {"debate-reference"}  # observation_mode="prompt": a new prompt each round
NUM_PROBLEMS = 2


@pytest.fixture(scope="module")
def model_server(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """``(url, log)``: the tiny model's ``/v1`` endpoint, and the JSONL log of its exchanges."""
    python = os.environ.get("LLM_ENVS_SERVER_PYTHON")
    if not python:
        if not all(importlib.util.find_spec(m) for m in ("torch", "transformers")):
            pytest.skip(
                "the model server needs torch and transformers: set LLM_ENVS_SERVER_PYTHON "
                "to an interpreter that has them (.ci/verifiers.sh does)"
            )
        python = sys.executable
    folder = tmp_path_factory.mktemp("model_server")
    log, ready, output = folder / "exchanges.jsonl", folder / "url", folder / "output.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    with output.open("w") as out:
        proc = subprocess.Popen(
            [python, "-m", "tests.verifiers.model_server", str(log), str(ready)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = wait_for_announcement(proc, ready, timeout=240)
        if url is None:
            pytest.fail(f"the model server did not start:\n{output.read_text()[-3000:]}")
        yield url, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def start_vf_eval(folder: Path, url: str, name: str, case: Mapping[str, Any]) -> subprocess.Popen:
    """Start ``vf-eval`` on a case, its output in ``folder`` (see :func:`evaluations`)."""
    config = {
        "model": "tiny",
        "num_rollouts": 1,
        "max_concurrent": 2,
        "output_dir": str(folder / "outputs"),
        "push": False,  # the Prime Intellect platform: not from a test
        "run": {"name": name},
        "client": {"type": "eval", "base_url": url, "api_key_var": "LLM_ENVS_TEST_API_KEY"},
        "sampling": {"max_tokens": 12, "temperature": 1.0},
        "env": {
            "others": case["others"],
            "taskset": {
                "id": PLUGIN,
                "env": case["env"],
                "env_kwargs": case["env_kwargs"],
                "env_task": case["env_task"],
                "seat": case["seat"],
                "seed": SEED,
                "num_problems": NUM_PROBLEMS,
            },
        },
    }
    path = folder / "eval.toml"
    path.write_text(tomli_w.dumps(config), encoding="utf-8")
    plugin_dir = folder / "plugin"
    plugin_dir.mkdir()
    write_plugin(plugin_dir)
    command = Path(sys.executable).with_name("vf-eval")
    with (folder / "stdout.txt").open("w") as out, (folder / "stderr.txt").open("w") as err:
        return subprocess.Popen(
            [str(command), "@", str(path), "--no-rich"],  # flags after the file, or it takes them
            cwd=folder,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_dir), str(ROOT)])},
            stdout=out,
            stderr=err,
        )


@pytest.fixture(scope="module")
def evaluations(model_server, tmp_path_factory) -> dict[str, tuple[int, Path]]:
    """Every case's ``vf-eval``, run at once: ``{name: (exit status, output folder)}``.

    At once, because each run spends most of its time importing verifiers.
    """
    url, _ = model_server
    runs = {}
    for name, case in CASES.items():
        if name not in NEEDS or importlib.util.find_spec(NEEDS[name]):
            folder = tmp_path_factory.mktemp(name)
            runs[name] = (start_vf_eval(folder, url, name, case), folder)
    done = {}
    for name, (proc, folder) in runs.items():
        try:
            done[name] = (proc.wait(timeout=300), folder)
        except subprocess.TimeoutExpired:
            proc.kill()
            done[name] = (-9, folder)
    return done


def episodes_of(evaluations, name: str) -> list[dict[str, Any]]:
    """The episodes of a case's ``traces.jsonl``, once its ``vf-eval`` succeeded."""
    if name not in evaluations:
        pytest.skip(f"{name} needs {NEEDS[name]}, which is not installed")
    status, folder = evaluations[name]
    errors = (folder / "stderr.txt").read_text(encoding="utf-8")
    assert status == 0, f"vf-eval failed ({status}):\n{errors[-4000:]}"
    traces = folder / "outputs" / name / "traces.jsonl"
    return [json.loads(line) for line in traces.read_text(encoding="utf-8").splitlines() if line]


def assistant_texts(trace: Mapping[str, Any]) -> list[str]:
    """What the model said in a trace, in order: its sampled messages."""
    return [n["message"].get("content") or "" for n in trace["nodes"] if n.get("sampled")]


def reward(trace: Mapping[str, Any]) -> float:
    return sum(r["score"] * r.get("weight", 1.0) for r in trace["rewards"].values() if r)


class Replay:
    """A seat's recorded texts, said again in order."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)

    def __call__(self, observation, info):
        return self.texts.pop(0)


def play_locally(case, seat, problem, texts):
    """The seat's episode through SeatView: ``(return, [observation messages per turn])``."""
    family = make_family(case["env"], dict(case["env_kwargs"]), task=case["env_task"], seed=SEED)
    others = (
        {a: Replay(t) for a, t in texts.items() if a != seat} if case["others"] == "model" else None
    )
    view, reset_seed, options = family_seat(
        family, seat, problem=problem, seed=derive_seed(SEED, problem), others=others
    )
    observation, _ = view.reset(seed=reset_seed, options=options)
    seen = []
    for text in texts[seat]:
        assert not view.done, f"{seat} took more turns in verifiers than in the episode"
        seen.append([dict(m) for m in observation["messages"]])
        observation, *_ = view.step(text)
    assert view.done, f"{seat}'s episode goes on past the turns verifiers played"
    return view.episode_return, seen


def conversations(observations, texts):
    """The requests the adapter sends: the messages of each observation it has not seen, appended.

    Unseen: past the longest prefix the observation shares with the previous
    observation and the reply to it.
    """
    history, before = [], []
    for observation, text in zip(observations, texts, strict=True):
        shared = 0
        for old, new in zip(before, observation, strict=False):
            if old != new:
                break
            shared += 1
        history = [*history, *observation[shared:]]
        yield history
        reply = {"role": "assistant", "content": text}
        history, before = [*history, reply], [*observation, reply]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_vf_eval_rewards_are_the_seat_returns(name, model_server, evaluations):
    case = CASES[name]
    episodes = episodes_of(evaluations, name)
    _, log = model_server
    exchanges = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]

    assert sorted(e["task"]["data"]["problem"] for e in episodes) == list(range(NUM_PROBLEMS))
    for episode in episodes:
        assert episode["ok"], episode.get("errors")
        problem = episode["task"]["data"]["problem"]
        traces = {t["info"]["seat"]: t for t in episode["traces"]}
        family = make_family(case["env"], dict(case["env_kwargs"]), task=case["env_task"])
        played = set(family.agents) if case["others"] == "model" else {case["seat"]}
        assert set(traces) == played
        texts = {seat: assistant_texts(trace) for seat, trace in traces.items()}
        for seat, trace in traces.items():
            trained = seat == case["seat"]  # the opponents play, untrained by default
            assert (trace["agent"]["name"], trace["agent"]["trainable"]) == (
                ("player", True) if trained else ("opponents", False)
            )
            assert trace["metrics"] == {"turns": len(texts[seat]), "unplayed_turns": 0}
            expected, observations = play_locally(case, seat, problem, texts)
            assert set(trace["rewards"]) == {REWARD}
            assert reward(trace) == expected, (name, problem, seat)
            requests = list(conversations(observations, texts[seat]))
            for request, text in zip(requests, texts[seat], strict=True):
                assert {"messages": request, "text": text} in exchanges
            if name not in REBUILT_PROMPTS:  # the chat grows: each request is the observation
                assert requests == observations
        seat_trace = traces[case["seat"]]
        assert seat_trace["info"]["episode_record"]["turns"], "the record of the episode"
    rewards = [reward(t) for e in episodes for t in e["traces"]]
    print(f"{name}: rewards {rewards}, {len(exchanges)} model calls so far")
