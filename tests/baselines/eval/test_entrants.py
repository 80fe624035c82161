"""Model specs: names, models, servers and sampling overrides; one sampler per model."""

from __future__ import annotations

import pytest

from baselines.eval.entrants import (
    Entrant,
    EntrantPolicy,
    build_policies,
    parse_entrant,
    parse_entrants,
)
from baselines.samplers import Completion, SampleRequest, SamplingParams


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("tiny", Entrant("tiny", "tiny")),
        ("base=tiny", Entrant("base", "tiny")),
        (
            "tiny@temperature=0.3",
            Entrant("tiny@temperature=0.3", "tiny", None, (("temperature", 0.3),)),
        ),
        (
            "hot=smollm2-135m-instruct@temperature=1.5,max_tokens=64",
            Entrant(
                "hot", "smollm2-135m-instruct", None, (("temperature", 1.5), ("max_tokens", 64))
            ),
        ),
        ("/runs/x/final_model", Entrant("/runs/x/final_model", "/runs/x/final_model")),
        ("trained=/runs/a=b/final", Entrant("trained", "/runs/a=b/final")),
        (
            "Qwen/Qwen2.5-0.5B-Instruct",
            Entrant("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
        ),
        (
            "api=http://127.0.0.1:8000/v1#org/model@top_p=0.9",
            Entrant("api", "http://127.0.0.1:8000/v1", "org/model", (("top_p", 0.9),)),
        ),
        ("http://host:8000/v1", Entrant("http://host:8000/v1", "http://host:8000/v1")),
    ],
)
def test_specs(spec, expected):
    entrant = parse_entrant(spec)
    assert entrant == expected
    assert parse_entrant(entrant.spec) == entrant


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "non-empty text of the form"),
        ("name=", "names no model"),
        ("tiny@temperature=hot", "temperature must be a number, got 'hot'"),
        ("tiny@temperature=0", "temperature must be > 0"),
        ("tiny@max_tokens=1.5", "max_tokens must be an int, got '1.5'"),
        ("tiny@seed=3", r"unknown sampling setting 'seed'; the settings are \['temperature'"),
        ("tiny#model", "'#MODEL' follows a server URL only"),
    ],
)
def test_bad_specs_name_the_fix(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_entrant(spec)


def test_names_must_be_unique():
    with pytest.raises(ValueError, match=r"two models are named 'tiny'.*a=tiny b=tiny"):
        parse_entrants(["tiny", "tiny"])
    with pytest.raises(ValueError, match="got one str"):
        parse_entrants("tiny")
    with pytest.raises(ValueError, match="at least one model"):
        parse_entrants([])


class Recorder:
    """A policy that records the sampling settings it is called with."""

    def __init__(self):
        self.calls = []

    def sample(self, requests, params):
        self.calls.append(params)
        return [Completion((), (), (), "x", "eos") for _ in requests]


def test_entrants_of_one_model_share_it_with_their_own_settings():
    shared = Recorder()
    entrants = parse_entrants(["cold=m@temperature=0.3", "hot=m@temperature=1.5,max_tokens=8"])
    policies = build_policies(entrants, loaded={"m": shared})
    assert all(isinstance(p, EntrantPolicy) and p.inner is shared for p in policies.values())
    request = [SampleRequest([{"role": "user", "content": "hi"}])]
    policies["cold"].sample(request, SamplingParams(max_tokens=32, seed=5))
    policies["hot"].sample(request, SamplingParams(max_tokens=32, seed=5))
    cold, hot = shared.calls
    assert (cold.temperature, cold.max_tokens, hot.temperature, hot.max_tokens) == (0.3, 32, 1.5, 8)
    assert cold.seed != hot.seed  # never the same random numbers


def test_a_missing_model_folder_fails_before_loading(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        build_policies(parse_entrants([str(tmp_path / "nothing")]))


def test_a_server_spec_needs_a_model_name_when_the_server_lists_none(free_port):
    with pytest.raises(
        ValueError, match=r"name the one to use: http://127.0.0.1:\d+/v1#MODEL_NAME"
    ):
        build_policies(parse_entrants([f"http://127.0.0.1:{free_port}/v1"]))
