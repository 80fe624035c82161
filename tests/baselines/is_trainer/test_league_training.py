"""League self-play in the IS trainer: the pool in play, snapshots, resume, refusals.

The tiny random model plays Tic Tac Toe (two seats, the random and minimax
anchors) and a two-seat arithmetic debate (the reference anchor).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baselines.is_trainer.config import ISTrainerConfig
from tests.baselines.is_trainer.test_trainer import Crash, assert_same_metrics, read_metrics

torch = pytest.importorskip("torch")

TICTACTOE = {"env": "textarena", "env_kwargs": {"game": "TicTacToe-v0"}}


def league_config(tmp_path: Path, model: Path, **overrides) -> ISTrainerConfig:
    settings = {
        "model": str(model),
        **TICTACTOE,
        "groups_per_batch": 3,
        "num_iterations": 3,
        "max_tokens": 8,
        "learning_rate": 1e-3,
        "sampler": "transformers",
        "eval_every": 0,
        "output_dir": str(tmp_path / "run"),
        "progress": False,
        "opponents": "league",
        "league_snapshot_every": 1,
        "league_max_snapshots": 2,
        "league_group_size": 2,
    }
    return ISTrainerConfig(**{**settings, **overrides})


@pytest.mark.slow
@pytest.mark.training
def test_a_league_run_plays_the_pool_and_snapshots_the_policy(tmp_path, tiny_model_dir):
    from baselines.is_trainer.trainer import train

    # Every group is trained on, and AdamW's weight decay moves the weights even where
    # the tiny model's games all end alike (zero advantages): the snapshots must differ.
    config = league_config(
        tmp_path,
        tiny_model_dir,
        eval_every=3,
        eval_scripted=True,
        drop_constant_groups=False,
        weight_decay=0.1,
    )
    rows = read_metrics(train(config))
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3]
    pools = [["latest", "scripted:random", "scripted:reference", "snapshot_00000"]]
    pools.append([*pools[0], "snapshot_00001"])
    pools.append(
        ["latest", "scripted:random", "scripted:reference", "snapshot_00001", "snapshot_00002"]
    )
    for row, pool in zip(rows, pools, strict=False):
        mix = {
            k.removeprefix("league/mix/"): v for k, v in row.items() if k.startswith("league/mix/")
        }
        assert set(mix) <= set(pool) and sum(mix.values()) == pytest.approx(1.0)
        ratings = {k for k in row if k.startswith("league/rating/")}
        assert ratings == {f"league/rating/{n}" for n in ["learner", *pool]}
        assert row["league/pool_size"] == len(pool)
        # Three groups of two games each, every game scored 0, 0.5 or 1.
        for key, score in row.items():
            if key.startswith("league/score/"):
                assert 0.0 <= score <= 1.0
    # Every snapshot's weights stay in the run folder (the pool keeps the newest two).
    league = Path(config.output_dir) / "league"
    assert sorted(p.name for p in league.iterdir()) == [
        "snapshot_00000",
        "snapshot_00001",
        "snapshot_00002",
    ]
    # A snapshot is a model folder: the one before iteration 0 is the initial model.
    from transformers import AutoModelForCausalLM

    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    first = AutoModelForCausalLM.from_pretrained(league / "snapshot_00000").state_dict()
    later = AutoModelForCausalLM.from_pretrained(league / "snapshot_00002").state_dict()
    assert all(torch.equal(first[k], initial[k]) for k in initial)
    assert not all(torch.equal(later[k], initial[k]) for k in initial)  # it trained
    # After the fact, the evaluator rates the snapshots against the anchors.
    from baselines.eval.config import EvalConfig
    from baselines.eval.run import Evaluation

    snapshots = [str(league / name) for name in ("snapshot_00000", "snapshot_00002")]
    summary = Evaluation(
        EvalConfig(
            models=(*snapshots, "scripted:random", "reference"),
            **TICTACTOE,
            problems=2,
            seating="rotations",
            max_tokens=8,
            device="cpu",
            num_bootstrap=50,
            output_dir=str(league / "eval"),
            progress=False,
        )
    ).run()
    rated = json.dumps(summary.to_json())
    assert all(name in rated for name in (*snapshots, "scripted:random", "reference"))
    # The run's report shows its league: the curves, and the snapshots' cross-play.
    from baselines.report import write_report

    page = write_report(config.output_dir).read_text()
    league_section = page[page.index("<h2>League</h2>") :]
    assert "Cross-play of the snapshots and anchors" in league_section
    assert "snapshot_00002" in league_section
    final = rows[-1]
    for anchor in ("random", "reference"):
        assert final[f"eval/scripted:{anchor}/num_episodes"] > 0
        assert f"eval/scripted:{anchor}/win" in final
    assert final["eval/scripted:reference/win"] == 0.0  # minimax never loses


@pytest.mark.slow
@pytest.mark.training
def test_a_resumed_league_matches_an_uninterrupted_one(tmp_path, tiny_model_dir, monkeypatch):
    import baselines.is_trainer.learner as learner_module
    import baselines.is_trainer.trainer as is_trainer

    settings = {"league_matchmaking": "pfsp", "league_snapshot_every": 1}
    whole = read_metrics(
        is_trainer.train(league_config(tmp_path / "a", tiny_model_dir, **settings))
    )
    real_save = learner_module.save_checkpoint

    def save_then_die(accelerator, model, output_dir, iteration, tokenizer, **kwargs):
        if iteration == 2:  # iteration 1 is logged, then the process dies
            raise Crash
        return real_save(accelerator, model, output_dir, iteration, tokenizer, **kwargs)

    config = league_config(tmp_path / "b", tiny_model_dir, **settings)
    monkeypatch.setattr(learner_module, "save_checkpoint", save_then_die)
    with pytest.raises(Crash):
        is_trainer.train(config)
    monkeypatch.setattr(learner_module, "save_checkpoint", real_save)
    resumed = read_metrics(is_trainer.train(config))

    assert_same_metrics(whole, resumed, iterations=[0, 1, 2])
    # The resumed run read the league from the checkpoint: iteration 1 met the pool of a
    # league that had played iteration 0 (its ratings and its first snapshot).
    assert "league/rating/snapshot_00000" in resumed[1]


@pytest.mark.slow
@pytest.mark.training
def test_a_debate_league_meets_the_reference_debaters(tmp_path, tiny_model_dir):
    from baselines.is_trainer.trainer import train

    config = league_config(
        tmp_path,
        tiny_model_dir,
        env="debate",
        env_kwargs={"num_agents": 2, "max_rounds": 1},
        task="arithmetic",
        task_kwargs={"max_digits": 1, "num_problems": 20},
        num_iterations=1,
        league_matchmaking="uniform",
        max_tokens=16,
    )
    (row,) = read_metrics(train(config))
    assert {k for k in row if k.startswith("league/rating/")} == {
        "league/rating/learner",
        "league/rating/latest",
        "league/rating/scripted:reference",
        "league/rating/snapshot_00000",
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"env": "expert_iteration", "env_kwargs": {}}, "a league needs opponents' seats"),
        (
            {"league_anchors": ("scripted:wizard",)},
            r"has scripted players \['random', 'reference'\]",
        ),
    ],
)
def test_bad_leagues_are_refused_before_the_model_loads(tmp_path, overrides, message):
    from baselines.is_trainer.trainer import ISTrainer

    config = league_config(tmp_path, Path("/nonexistent/model"), **overrides)
    with pytest.raises(ValueError, match=message):
        ISTrainer(config)


def test_league_settings_need_a_league():
    with pytest.raises(ValueError, match="league_group_size set with opponents='mirror'"):
        ISTrainerConfig(league_group_size=2)
    with pytest.raises(ValueError, match="is not scripted:SET"):
        ISTrainerConfig(opponents="league", league_anchors=("minimax",))


@pytest.mark.slow
@pytest.mark.training
def test_a_lora_league_on_vllm_plays_its_snapshots_as_adapters_of_one_engine(
    tmp_path, tiny_model_dir, monkeypatch
):
    pytest.importorskip("vllm")
    from baselines.is_trainer.trainer import ISTrainer
    from baselines.samplers.base import SampleRequest, SamplingParams
    from baselines.samplers.vllm_policy import VLLMAdapter

    config = league_config(
        tmp_path,
        tiny_model_dir,
        sampler="vllm",
        lora_r=8,
        lora_alpha=16.0,
        drop_constant_groups=False,
        league_matchmaking="uniform",
        num_threads=1,
    )
    trainer = ISTrainer(config)
    # The tiny model's games all end alike (no gradient): give the adapter weights of its
    # own, so that the snapshots differ from the base model.
    with torch.no_grad():
        for name, parameter in trainer.learner.unwrapped.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.2, generator=torch.Generator().manual_seed(0))
    finish = trainer.finish
    monkeypatch.setattr(trainer, "finish", lambda: None)  # the engines stay up for the checks
    trainer.run()
    league = trainer.league
    assert league is not None and league.adapters
    snapshots = [o.name for o in league.league.snapshots]
    assert snapshots == ["snapshot_00001", "snapshot_00002"]
    policies = [league._policy(name) for name in snapshots]
    assert all(isinstance(p, VLLMAdapter) for p in policies)
    assert policies[0].engine is policies[1].engine  # one engine, the adapters side by side
    assert policies[0].engine is not trainer.learner.sampler.policy

    # The adapter on the base engine samples what the merged snapshot folder scores:
    # the engine's logprobs of its own tokens are the merged model's.
    from transformers import AutoModelForCausalLM

    folder = Path(config.output_dir) / "league" / "snapshot_00002"
    merged = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    request = SampleRequest([{"role": "user", "content": "Your move: [4] or [0]?"}])
    (done,) = policies[1].sample([request], SamplingParams(max_tokens=6, seed=1))
    ids = torch.tensor([[*done.prompt_tokens, *done.tokens]])
    with torch.no_grad():
        logits = merged(ids).logits[0, len(done.prompt_tokens) - 1 : -1]
    expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(done.tokens)[:, None])[:, 0]
    torch.testing.assert_close(torch.tensor(done.logprobs), expected, atol=2e-3, rtol=0)
    # ...and not the base model's: the adapter is there.
    with torch.no_grad():
        plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        base = plain(ids).logits[0, len(done.prompt_tokens) - 1 : -1]
    assert not torch.allclose(torch.log_softmax(base, -1), torch.log_softmax(logits, -1), atol=1e-3)
    finish()


@pytest.mark.slow
@pytest.mark.training
def test_an_endpoint_anchor_plays_from_an_openai_compatible_server(tmp_path, tiny_model_dir):
    from baselines.is_trainer.trainer import train
    from tests.baselines.eval.test_endpoints import FakeServer

    with FakeServer([], text="[4]") as server:  # an OpenAI-compatible server that plays [4]
        config = league_config(
            tmp_path,
            tiny_model_dir,
            num_iterations=2,
            league_anchors=(f"served={server.url}#fake",),
            league_matchmaking="uniform",
            league_snapshot_every=0,
            groups_per_batch=4,
        )
        rows = read_metrics(train(config))
        requests = len(server.requests)
    met = {k for row in rows for k in row if k.startswith("league/mix/")}
    assert met == {"league/mix/latest", "league/mix/served"}  # uniform over two, 8 groups
    assert all("league/rating/served" in row for row in rows)
    assert requests > 0  # the server played its seats
    episodes = Path(config.output_dir) / "episodes"
    texts = [
        turn["text"]
        for path in episodes.glob("iter_*.jsonl")
        for line in path.read_text().splitlines()
        for turn in json.loads(line)["turns"]
    ]
    assert "[4]" in texts
