"""Several sampling servers behind one policy: routing, shares per process, the config's checks."""

from __future__ import annotations

import re
import threading
import time
from types import SimpleNamespace

import pytest

from baselines.cli import parse_config
from baselines.is_trainer.config import ISTrainerConfig
from baselines.samplers import Completion, SampleRequest, SamplingParams
from baselines.samplers.server_pool import (
    ServerPool,
    pick_server,
    split_urls,
    urls_for_process,
    urls_to_push,
)

REQUEST = SampleRequest([{"role": "user", "content": "What is 1 + 1?"}])

# ------------------------------------------------------------------- routing


@pytest.mark.parametrize(
    ("routing", "in_flight", "turn", "expected"),
    [
        ("round_robin", [0, 0, 0], 0, 0),
        ("round_robin", [0, 0, 0], 4, 1),
        ("round_robin", [9, 0, 0], 3, 0),  # round-robin ignores the load
        ("least_loaded", [3, 1, 2], 0, 1),
        ("least_loaded", [3, 1, 2], 2, 1),
        ("least_loaded", [0, 0, 0], 0, 0),  # ties rotate with the turn
        ("least_loaded", [0, 0, 0], 1, 1),
        ("least_loaded", [0, 0, 0], 5, 2),
        ("least_loaded", [2, 1, 1], 0, 1),  # the first of the least loaded from the turn on
        ("least_loaded", [2, 1, 1], 2, 2),
        ("least_loaded", [2, 1, 1], 3, 1),
        ("least_loaded", [7], 12, 0),
    ],
)
def test_pick_server(routing, in_flight, turn, expected):
    assert pick_server(routing, in_flight, turn) == expected


def test_least_loaded_spreads_equal_servers_evenly():
    picks = [pick_server("least_loaded", [0, 0, 0, 0], t) for t in range(8)]
    assert picks == [0, 1, 2, 3, 0, 1, 2, 3]


@pytest.mark.parametrize(
    ("routing", "in_flight", "message"),
    [
        (
            "fastest",
            [0, 0],
            "routing must be one of ['round_robin', 'least_loaded'], got 'fastest'",
        ),
        ("round_robin", [], "needs at least one server"),
    ],
)
def test_pick_server_rejects(routing, in_flight, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        pick_server(routing, in_flight, 0)


# ------------------------------------------------------- servers per process


@pytest.mark.parametrize(
    ("num_urls", "num_processes", "shares", "pushes"),
    [
        (1, 1, [[0]], [[0]]),
        (3, 1, [[0, 1, 2]], [[0, 1, 2]]),
        (4, 2, [[0, 2], [1, 3]], [[0, 2], [1, 3]]),
        (5, 2, [[0, 2, 4], [1, 3]], [[0, 2, 4], [1, 3]]),
        (2, 2, [[0], [1]], [[0], [1]]),
        (1, 3, [[0], [0], [0]], [[0], [], []]),  # one server: process 0 pushes
        (2, 4, [[0], [1], [0], [1]], [[0], [1], [], []]),
        (3, 4, [[0], [1], [2], [0]], [[0], [1], [2], []]),
    ],
)
def test_every_server_is_sampled_and_pushed_to_exactly_once(
    num_urls, num_processes, shares, pushes
):
    urls = [f"http://10.0.0.{i}:8000/v1" for i in range(num_urls)]
    got_shares = [urls_for_process(urls, p, num_processes) for p in range(num_processes)]
    got_pushes = [urls_to_push(urls, p, num_processes) for p in range(num_processes)]
    assert got_shares == [[urls[i] for i in share] for share in shares]
    assert got_pushes == [[urls[i] for i in push] for push in pushes]
    pushed = [u for push in got_pushes for u in push]
    assert sorted(pushed) == sorted(urls)  # each server gets the weights from one process


def test_shares_reject_a_process_outside_the_job():
    with pytest.raises(
        ValueError, match=r"process_index must be in \[0, 2\) for 2 processes, got 2"
    ):
        urls_for_process(["a"], 2, 2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://a:8000/v1", ["http://a:8000/v1"]),
        (" http://a/v1 ,http://b/v1, ", ["http://a/v1", "http://b/v1"]),
        (["http://a/v1", " "], ["http://a/v1"]),
    ],
)
def test_split_urls(text, expected):
    assert split_urls(text) == expected


def test_split_urls_rejects_an_empty_list():
    with pytest.raises(ValueError, match="no server URL in ' , '; give one or more /v1 base URLs"):
        split_urls(" , ")


# -------------------------------------------------------------- the pool


class FakeServer:
    """A policy that records what it was asked, and takes ``delay`` seconds per request."""

    def __init__(self, name: str, delay: float = 0.0, max_concurrency: int = 4) -> None:
        self.name = name
        self.delay = delay
        self.max_concurrency = max_concurrency
        self.seeds: list[int | None] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()

    def sample(self, requests, params):
        assert len(requests) == 1  # the pool sends one request per call
        with self._lock:
            self.seeds.append(params.seed)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(self.delay)
        with self._lock:
            self.in_flight -= 1
        return [Completion((), (1,), (0.0,), f"{self.name}:{params.seed}", "eos")]


def test_round_robin_keeps_order_and_seeds():
    servers = [FakeServer("a"), FakeServer("b"), FakeServer("c")]
    pool = ServerPool(servers, "round_robin")
    texts = [c.text for c in pool.sample([REQUEST] * 7, SamplingParams(seed=100))]
    assert texts == ["a:100", "b:101", "c:102", "a:103", "b:104", "c:105", "a:106"]
    assert pool.served == [3, 2, 2]
    # The next call goes on where this one stopped; seeds start again at the call's seed.
    assert [c.text for c in pool.sample([REQUEST] * 2, SamplingParams(seed=0))] == ["b:0", "c:1"]


def test_no_seed_stays_no_seed():
    pool = ServerPool([FakeServer("a"), FakeServer("b")])
    assert [c.text for c in pool.sample([REQUEST] * 2, SamplingParams())] == ["a:None", "b:None"]


def test_least_loaded_sends_less_to_a_slow_server():
    fast, slow = FakeServer("fast", delay=0.005), FakeServer("slow", delay=0.5)
    pool = ServerPool([fast, slow], "least_loaded", max_concurrency=2)
    completions = pool.sample([REQUEST] * 20, SamplingParams(seed=0))
    assert [c.text.split(":")[1] for c in completions] == [str(i) for i in range(20)]
    assert pool.served[0] + pool.served[1] == 20
    assert pool.served[1] <= 3 < 17 <= pool.served[0]


def test_round_robin_sends_the_same_share_to_a_slow_server():
    fast, slow = FakeServer("fast", delay=0.0), FakeServer("slow", delay=0.02)
    pool = ServerPool([fast, slow], "round_robin", max_concurrency=2)
    pool.sample([REQUEST] * 10, SamplingParams(seed=0))
    assert pool.served == [5, 5]


def test_concurrency_defaults_to_the_sum_of_the_members():
    servers = [FakeServer("a", delay=0.2, max_concurrency=2) for _ in range(2)]
    pool = ServerPool(servers, "least_loaded")
    assert pool.max_concurrency == 4
    pool.sample([REQUEST] * 8, SamplingParams())
    assert [s.most_in_flight for s in servers] == [2, 2]


def test_a_failing_server_raises_and_frees_its_slot():
    class Broken(FakeServer):
        def sample(self, requests, params):
            raise RuntimeError("down")

    pool = ServerPool([Broken("x"), FakeServer("ok")], "least_loaded")
    with pytest.raises(RuntimeError, match="down"):
        pool.sample([REQUEST] * 2, SamplingParams())
    assert pool._in_flight == [0, 0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"policies": []}, "needs at least one policy"),
        ({"routing": "random"}, "routing must be one of"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1, got 0"),
    ],
)
def test_pool_rejects(kwargs, message):
    arguments = {"policies": [FakeServer("a")], **kwargs}
    with pytest.raises(ValueError, match=message):
        ServerPool(**arguments)


def test_an_empty_call_asks_nobody():
    server = FakeServer("a")
    assert ServerPool([server]).sample([], SamplingParams()) == []
    assert server.seeds == []


# ------------------------------------------------------------------ config

OPENAI = ["--sampler", "openai", "--sampler-url", "http://a/v1"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sampler-routing", "fastest"], "argument --sampler-routing: invalid choice: 'fastest'"),
        (["--sampler-weight-transfer", "rdma"], "invalid choice: 'rdma'"),
        (
            ["--sampler-weight-transfer", "nccl"],
            "sampler_weight_transfer='nccl' sends weights to vLLM servers, for sampler='openai' "
            "only, got sampler='auto'",
        ),
        (
            [*OPENAI, "--device", "cpu", "--sampler-weight-transfer", "nccl"],
            "needs CUDA, got device='cpu'; use sampler_weight_transfer='folder'",
        ),
        (
            [*OPENAI, "--sampler-weights-dir", "/w", "--sampler-weight-transfer", "nccl"],
            "with 'nccl' the weights go GPU to GPU: drop sampler_weights_dir",
        ),
    ],
)
def test_cli_rejects_bad_server_settings(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse_config(ISTrainerConfig, argv)
    assert message in capsys.readouterr().err


def test_config_rejects_an_unknown_routing():
    message = "sampler_routing: Input should be 'round_robin' or 'least_loaded', got 'fastest'"
    with pytest.raises(ValueError, match=re.escape(message)):
        ISTrainerConfig(sampler_routing="fastest")


def test_server_settings_parse():
    argv = ["--sampler", "openai", "--sampler-url", "http://a/v1,http://b/v1"]
    config = parse_config(ISTrainerConfig, [*argv, "--sampler-routing", "least_loaded"])
    chosen = config.sampling
    assert (chosen.sampler_routing, chosen.sampler_weight_transfer) == ("least_loaded", "folder")
    nccl = parse_config(ISTrainerConfig, [*argv, "--sampler-weight-transfer", "nccl"])
    assert nccl.sampling.sampler_weight_transfer == "nccl"


def test_build_sampler_refuses_nccl_on_cpu():
    from baselines.samplers.build import build_sampler

    config = SimpleNamespace(
        sampler_url="http://127.0.0.1:9/v1",
        sampler_routing="round_robin",
        sampler_weight_transfer="nccl",
        sampler_weights_dir=None,
    )
    with pytest.raises(ValueError, match=r"needs CUDA .* use --sampler-weight-transfer folder"):
        build_sampler(
            "openai",
            model=None,
            tokenizer=None,
            model_path="tiny",
            cuda=False,
            seed=0,
            process_index=0,
            max_model_len=512,
            config=config,
            num_processes=1,
        )
