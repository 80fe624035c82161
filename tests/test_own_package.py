"""A family from a package of its own, installed with pip, in every command by its name alone.

What a user does after ``llm-envs new-env guessnum``: a virtual environment
(``--system-site-packages``, so that torch and the other dependencies are
there), ``pip install -e`` of this checkout and of the new package (offline:
``--no-deps --no-build-isolation``), then every command with ``--env guessnum`` from a
folder of their own: nothing of this repository is named, written or put on a
path, and no launcher registers the family. One virtual environment serves
every test here (module scope): building it is most of a test's cost.

The engines' own environments (verl, verifiers) install the same package in
``.ci/verl.sh`` and ``.ci/verifiers.sh``; their tests are
``tests/verl/test_own_package.py`` and ``tests/verifiers/test_own_package.py``.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.training]

# Offline: the package needs nothing beyond what this environment has.
INSTALL = "-m pip install -q --no-deps --no-build-isolation --no-index -e"
# The smallest settings that train: one game of one round (two turns), four tokens a turn.
SMALLEST = "--model tiny --env-kwargs '{\"max_rounds\": 1}' --max-tokens 4 --device cpu"
# A league of the learner, a snapshot and the package's scripted players (its anchors).
LEAGUE = (
    f"-m baselines.is_trainer --env guessnum {SMALLEST} --opponents league "
    "--league-snapshot-every 1 --league-group-size 2 --num-iterations 2 --groups-per-batch 2 "
    "--sampler transformers --eval-every 0 --no-progress --output-dir league"
)
GRPO = (
    f"-m baselines.grpo --env guessnum {SMALLEST} --max-steps 1 --items-per-step 1 "
    "--vllm off --no-save-model --save-episodes 1 --output-dir grpo"
)
MAGRPO = "-m baselines.magrpo --env guessnum --model tiny --output-dir magrpo"
# The reference player in both seats: no model to load.
EVALUATE = (
    "-m baselines.commands eval --env guessnum --models reference --problems 2 "
    "--num-bootstrap 20 --no-progress --output-dir eval"
)


@dataclass(frozen=True)
class Installed:
    """The virtual environment's interpreter, the package's folder, the user's folder."""

    python: str
    package: Path
    work: Path

    def run(self, args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``python ARGS`` (shell words) in the user's folder."""
        return run([self.python, *shlex.split(args)], self.work, timeout)


def environ() -> dict[str, str]:
    """This process's environment without its PYTHONPATH: the repository on no path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "HF_HUB_OFFLINE": "1"}


def run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=environ(), capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("own_package")
    venv = root / "venv"
    # No pip of its own: the system's (seen through --system-site-packages) installs into it,
    # and builds with the system's setuptools (a venv's bundled one may lack bdist_wheel).
    argv = [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)]
    made = run(argv, root)
    assert made.returncode == 0, made.stderr
    python = str(venv / "bin" / "python")
    # This checkout, whatever llm-envs the system has (an editable install elsewhere, or none).
    done = run([python, *shlex.split(INSTALL), str(ROOT)], root)
    assert done.returncode == 0, done.stdout + done.stderr
    # Then as docs/your_own_environment.md says: llm-envs new-env, pip install -e ".[test]".
    wrote = run([str(venv / "bin" / "llm-envs"), "new-env", "guessnum"], root)
    assert wrote.returncode == 0, wrote.stderr
    package = root / "guessnum"
    done = run([python, *shlex.split(INSTALL), f"{package}[test]"], root)
    assert done.returncode == 0, done.stdout + done.stderr
    work = root / "work"  # the user's folder: nothing of this repository on any path
    work.mkdir()
    return Installed(python, package, work)


def test_the_new_package_s_own_tests_pass_installed(installed):
    tested = run(
        [installed.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], installed.package
    )
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert " passed" in tested.stdout and "failed" not in tested.stdout


def test_llm_envs_check_passes_it_by_name(installed):
    llm_envs = str(Path(installed.python).with_name("llm-envs"))
    checked = run([llm_envs, "check", "guessnum", "--output-dir", "check"], installed.work)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    lines = {line.split()[1]: line.split()[0] for line in checked.stdout.splitlines()[:-1]}
    # The scaffold declares its reward range: every return is held to it.
    assert lines["reward_range"] == "PASS" and lines["reference"] == "PASS", checked.stdout
    page = installed.work / "check" / "guessnum" / "index.html"
    assert page.exists() and "guessnum" in page.read_text()


def test_trl_grpo_trains_it_by_name(installed):
    trained = installed.run(GRPO)
    assert trained.returncode == 0, trained.stderr[-3000:]
    rows = [json.loads(line) for line in (installed.work / "grpo" / "metrics.jsonl").open()]
    assert any("env/win" in row or "env/all/win" in row for row in rows), rows
    (episodes,) = (installed.work / "grpo" / "episodes").glob("step_*.jsonl")
    assert "guess" in episodes.read_text()


def test_a_league_trains_it_and_the_evaluator_and_the_report_take_it(installed):
    # The IS trainer against a pool of the learner, its snapshots and the package's
    # scripted players (the league's anchors), then the report of that run.
    trained = installed.run(LEAGUE)
    assert trained.returncode == 0, trained.stderr[-3000:]
    run_dir = installed.work / "league"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    losses = [row["optim/loss"] for row in rows if "optim/loss" in row]
    assert losses and all(math.isfinite(loss) for loss in losses), rows
    assert {"env/all/win", "env/all/draw", "env/all/loss"} <= set(rows[0])  # the family's infos
    pool = {k.removeprefix("league/rating/") for k in rows[-1] if k.startswith("league/rating/")}
    assert {"learner", "latest", "scripted:reference", "scripted:random"} <= pool, pool
    assert any(p.startswith("snapshot_") for p in pool), pool
    assert json.loads((run_dir / "config.json").read_text())["env"] == "guessnum"
    reported = installed.run("-m baselines.commands report league", timeout=120)
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert "guessnum" in (run_dir / "report" / "index.html").read_text()

    evaluated = installed.run(EVALUATE)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "guessnum" in (installed.work / "eval" / "summary.json").read_text()
    assert not list(installed.package.glob("*.egg-info"))  # the install wrote nothing there


def test_magrpo_refuses_it_naming_the_team_reward_it_lacks(installed):
    refused = installed.run(MAGRPO, timeout=120)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--env guessnum has none" in refused.stderr and "team reward" in refused.stderr
    assert not (installed.work / "magrpo").exists()  # refused before anything was written


SERVED = {"max_rounds": 3}  # the server's settings (a client may not change them)

# Run by the virtual environment's interpreter against a server at argv[1]: both seats
# through the project's coordinator client (the rendezvous), then one seat through TRL's
# environment_factory, in process and served (OpenEnv), move for move. Prints a JSON line.
CLIENT = """
import asyncio, json, sys
from llm_envs.bridges.trl import SeatEnvironmentFactory
from llm_envs.bridges.trl import RemoteSeatEnvironmentFactory
from llm_envs.registration import make_family
from llm_envs.serve.coordinators import ServerCoordinator

url, kwargs = sys.argv[1], json.loads(sys.argv[2])
family = make_family("guessnum", kwargs)
episode = {"env": "guessnum", "problem": 1, "seed": 5}  # the server's settings: kwargs

async def seat(name, player):
    coordinator = ServerCoordinator(url)
    try:
        session = await coordinator.meet("g", name, episode, family_seed=0)
        texts = []
        while (message := await session.message())["type"] == "turn":
            texts.append(player(message["observation"], message["info"]))
            await session.act(texts[-1], message["turn"])
        return name, texts, message
    finally:
        await coordinator.close()

async def both():
    players = family.scripted_players(0)["random"]
    players["agent_1"] = family.reference_players()["agent_1"]
    return await asyncio.gather(*(seat(n, p) for n, p in players.items()))

served = {name: (texts, end) for name, texts, end in asyncio.run(both())}
env, seed, options = family.eval_episode(1, 5)
env.reset(seed=seed, options=options)
said = {name: list(texts) for name, (texts, _) in served.items()}
local = dict.fromkeys(env.possible_agents, 0.0)
for agent in env.agent_iter():
    _, reward, termination, truncation, _ = env.last()
    local[agent] += reward
    env.step(None if termination or truncation else said[agent].pop(0))

def play(factory):
    environment = factory()
    environment.reset(problem=2)
    replies = [environment.take_turn(f"<guess>{n}</guess>") for n in (50, 25, 12)
               if not environment.done]
    return replies, environment.get_reward()

in_process = play(SeatEnvironmentFactory("guessnum", kwargs, seat="agent_0", seed=4))
remote = RemoteSeatEnvironmentFactory(url, seat="agent_0", seed=4, env="guessnum")
over_openenv = play(remote)
remote.close()
print(json.dumps({
    "ends": {n: end for n, (_, end) in served.items()},
    "turns": {n: len(texts) for n, (texts, _) in served.items()},
    "local": local, "in_process": in_process, "over_openenv": over_openenv,
}))
"""


@pytest.fixture
def server(installed: Installed) -> Iterator[str]:
    """``llm-envs serve --env guessnum`` under the virtual environment; yield its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [installed.python, "-m", "baselines.commands", "serve", "--env", "guessnum"]
    argv += ["--env-kwargs", json.dumps(SERVED), f"--port={port}", "--log-level=warning"]
    log = installed.work / "serve.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(argv, cwd=installed.work, env=environ(), stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start within a minute"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_served_by_name_its_seats_play_over_http_and_trl_plays_a_seat_over_openenv(
    installed, server
):
    import httpx

    listed = httpx.get(f"{server}/envs").json()["envs"]
    assert [e["env"] for e in listed if e["default"]] == ["guessnum"]
    argv = [installed.python, "-c", CLIENT, server, json.dumps(SERVED)]
    played = run(argv, installed.work, timeout=120)
    assert played.returncode == 0, played.stderr[-3000:]
    result = json.loads(played.stdout.strip().splitlines()[-1])
    ends = result["ends"]
    assert {e["type"] for e in ends.values()} == {"end"} and sum(result["turns"].values()) >= 2
    # Each seat's return is the one the same texts earn in a local game.
    assert {n: e["return"] for n, e in ends.items()} == pytest.approx(result["local"])
    # The reference bisects against random guesses: it wins or draws, never loses.
    assert result["local"]["agent_1"] >= result["local"]["agent_0"]
    # TRL's environment_factory: the same seat's episode in process and served, move for move.
    assert result["over_openenv"] == result["in_process"]
    replies, reward = result["in_process"]
    assert replies and "guessed 50" in replies[0] and reward in (-1.0, 0.0, 1.0)
