"""The code-collaboration environment: conformance, configuration, histories, rewards, fork."""

from __future__ import annotations

import copy

import pettingzoo
import pytest

import llm_envs  # noqa: F401  (registers the environments)
from llm_envs.code_collab import (
    CodeCollabAECEnv,
    CodeCollabEnv,
    ScriptedCoder,
    env,
    level_feedback,
    parallel_env,
    raw_env,
    step_batch,
)
from llm_envs.contract import CONTEXT_KEYS
from llm_envs.sandbox import default_sandbox
from llm_envs.testing.conformance import check_aec_env, check_parallel_env, play_aec
from tests.code_collab.cases import F_PROBLEM, INLINE, IS_BIG, IS_PRIME, USES_AUX


def fake_expert(problem, helper_code, main_code):
    return {"aux": "Check primality.", "main": "Call aux(n)."}


# ------------------------------------------------------------------------------ conformance

CONFIGS = [
    {},
    {"num_agents": 1},
    {"num_turns": 3, "sandbox_slice": "all"},
    {"num_turns": 6, "sandbox_slice": -1},  # long episodes: random texts now and then define f
    {"external_mode": "plain", "reward_shift": -4.0},
    {"termination_threshold": 0.5, "num_turns": 4},
    {"external_mode": "expert_edits", "expert": fake_expert},
]


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_aec_conformance(kwargs, x_or_y):
    check_aec_env(lambda: env(problems=[F_PROBLEM, x_or_y], **kwargs))
    check_aec_env(lambda: raw_env(problems=[F_PROBLEM, x_or_y], **kwargs))


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_parallel_conformance(kwargs, x_or_y):
    check_parallel_env(lambda: parallel_env(problems=[F_PROBLEM, x_or_y], **kwargs))


def test_registered_in_both_registries():
    aec = pettingzoo.make("aec", "llm_envs/CodeCollab-v0", num_agents=1)
    aec.reset(seed=0)
    assert aec.agents == ["main"]
    assert isinstance(aec.unwrapped, CodeCollabAECEnv)
    parallel = pettingzoo.make("parallel", "llm_envs/CodeCollab-v0", problems="humaneval")
    observations, _ = parallel.reset(seed=0)
    assert set(observations) == {"helper", "main"}
    assert parallel.problem.task_id.startswith("HumanEval/")


def test_aec_form_is_pettingzoos_conversion(x_or_y):
    from pettingzoo.utils.conversions import parallel_to_aec_wrapper

    aec = raw_env(problems=[x_or_y])
    assert isinstance(aec._conversion, parallel_to_aec_wrapper)
    assert isinstance(aec.parallel_env, CodeCollabEnv)


# ---------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_agents": 3}, ValueError, r"num_agents must be an int in \[1, 2\] \(2: helper and"),
        ({"num_agents": 2.0}, TypeError, r"num_agents must be an int .*got 2.0 \(a float\)"),
        ({"num_agents": True}, TypeError, r"got True \(a bool\)"),
        ({"num_turns": True}, TypeError, r"num_turns must be an int >= 1, got True \(a bool\)"),
        ({"num_turns": "2"}, TypeError, r"num_turns must be an int >= 1, got '2' \(a str\)"),
        ({"num_turns": 0}, ValueError, "num_turns must be an int >= 1"),
        ({"external_mode": "level_passed"}, ValueError, "external_mode must be one of"),
        ({"sandbox_slice": 1.5}, ValueError, "sandbox_slice must be an int"),
        ({"sandbox_slice": "first"}, ValueError, "sandbox_slice must be an int"),
        ({"external_mode": "expert_edits"}, ValueError, "needs expert="),
        ({"expert": fake_expert}, ValueError, "expert is only used with"),
        ({"problems": []}, ValueError, "problems must not be empty"),
        ({"problems": "apps"}, ValueError, "or one of"),
        ({"problems": ["def f(): pass"]}, TypeError, "CodeProblem records"),
        ({"problems": 3}, TypeError, "problems must be a sequence of CodeProblem, got 3"),
        ({"problems": F_PROBLEM}, TypeError, r"got one CodeProblem .*: wrap it in a list"),
        ({"render_mode": "rgb_array"}, ValueError, "render_mode must be one of"),
        ({"reward_shift": "-4"}, TypeError, "reward_shift must be a finite number, got '-4'"),
        (
            {"reward_shift": float("nan")},
            ValueError,
            "reward_shift must be a finite number, got nan",
        ),
        (
            {"reward_shift": float("inf")},
            ValueError,
            "reward_shift must be a finite number, got inf",
        ),
        ({"reward_shift": True}, TypeError, r"reward_shift must be a finite number, got True"),
        ({"termination_threshold": float("nan")}, ValueError, "termination_threshold must be a"),
        ({"termination_threshold": "3"}, TypeError, "termination_threshold must be"),
        ({"timeout": 0}, ValueError, r"timeout must be a finite number of seconds in \(0, 3600\]"),
        ({"timeout": float("nan")}, ValueError, r"timeout must be .* got nan"),
        ({"timeout": float("inf")}, ValueError, r"timeout must be .* got inf"),
        ({"timeout": 1e9}, ValueError, r"in \(0, 3600\], got 1000000000.0"),
        ({"timeout": True}, TypeError, r"timeout must be .* got True \(a bool\)"),
        ({"sandbox": "pool"}, TypeError, "sandbox must be an llm_envs.sandbox.Sandbox"),
    ],
)
def test_bad_configuration_names_the_fix(kwargs, error, message, x_or_y):
    kwargs = {"problems": [x_or_y], **kwargs}
    with pytest.raises(error, match=message):
        parallel_env(**kwargs)


def test_default_problems_are_coophumaneval():
    game = parallel_env()
    assert len(game.config.problems) == 82
    assert game.config.num_turns == 2 and game.config.sandbox_slice == 1


# ------------------------------------------------------------------------------------ reset


def test_reset_draws_a_problem_from_the_seed(che):
    problems = list(che.values())
    drawn = [parallel_env(problems=problems).reset(seed=s)[0]["main"] for s in range(5)]
    again = [parallel_env(problems=problems).reset(seed=s)[0]["main"] for s in range(5)]
    assert drawn == again
    assert len({d["messages"][0]["content"] for d in drawn}) > 1


def test_reset_options_pick_the_problem(che, x_or_y):
    game = parallel_env(problems=list(che.values()))
    for choice in (x_or_y, 0, "CoopHumanEval/0"):
        game.reset(seed=3, options={"problem": choice})
        assert game.problem == x_or_y
    with pytest.warns(UserWarning, match="unknown option"):
        game.reset(options={"question": "?"})
    with pytest.raises(KeyError, match="not among"):
        game.reset(options={"problem": "HumanEval/0"})
    with pytest.raises(IndexError, match="out of range"):
        game.reset(options={"problem": 82})


def test_first_prompts(x_or_y):
    observations, infos = parallel_env(problems=[x_or_y]).reset(seed=0)
    helper = observations["helper"]["messages"]
    main = observations["main"]["messages"]
    assert [m["role"] for m in helper] == ["user"] and [m["role"] for m in main] == ["user"]
    assert x_or_y.prompt.strip() in helper[0]["content"]
    assert "named `aux`" in helper[0]["content"]
    assert "Do not implement `x_or_y`" in helper[0]["content"]
    assert "You may call `aux(...)`" in main[0]["content"]
    assert "do not define `aux` yourself" in main[0]["content"]
    for text in (helper[0]["content"], main[0]["content"]):
        assert "Output only the code" in text
    assert infos == {"helper": {"stop": [], "turn": 0}, "main": {"stop": [], "turn": 0}}
    single, _ = parallel_env(problems=[x_or_y], num_agents=1).reset(seed=0)
    assert set(single) == {"main"}
    assert "aux" not in single["main"]["messages"][0]["content"]


# ---------------------------------------------------------------------- histories and rewards


def test_each_agent_keeps_its_own_full_history(x_or_y):
    game = parallel_env(problems=[x_or_y], num_turns=3)
    first, _ = game.reset(seed=0)
    turns = [
        {
            "helper": "def aux(n):\n    return 'HELPER-1'",
            "main": "def x_or_y(n, x, y):\n    # MAIN-1",
        },
        {
            "helper": "def aux(n):\n    return 'HELPER-2'",
            "main": "def x_or_y(n, x, y):\n    # MAIN-2",
        },
    ]
    previous = first
    for actions in turns:
        observations, *_ = game.step(actions)
        for agent in ("helper", "main"):
            messages = observations[agent]["messages"]
            # The new observation is the previous one, the agent's answer, and one new prompt.
            assert messages[:-2] == previous[agent]["messages"]
            assert messages[-2] == {"role": "assistant", "content": actions[agent]}
            assert messages[-1]["role"] == "user"
        previous = observations
    helper_text = "\n".join(m["content"] for m in previous["helper"]["messages"])
    main_text = "\n".join(m["content"] for m in previous["main"]["messages"])
    assert "MAIN-" not in helper_text and "HELPER-" not in main_text
    assert [m["role"] for m in previous["main"]["messages"]] == ["user", "assistant"] * 2 + ["user"]


def test_step_rewards_infos_and_truncation(x_or_y):
    game = parallel_env(problems=[x_or_y], num_turns=2, reward_shift=-4.0)
    game.reset(seed=0)
    # IS_BIG passes 2/5: 1.0 + 0.5 + 0.4 + 1.5 = 3.4, shifted to -0.6.
    observations, rewards, terms, truncs, infos = game.step({"helper": IS_BIG, "main": USES_AUX})
    assert rewards == {"helper": pytest.approx(-0.6), "main": pytest.approx(-0.6)}
    assert terms == truncs == {"helper": False, "main": False}
    info = infos["main"]
    assert info == infos["helper"]
    assert {k: info[k] for k in CONTEXT_KEYS & info.keys()} == {"stop": [], "turn": 1}
    assert (info["level1"], info["level2"], info["bonus"]) == (1.0, 0.5, 1.5)
    assert info["level3"] == pytest.approx(0.4) and info["total"] == pytest.approx(3.4)
    assert (info["passed"], info["total_tests"], info["pass_rate"]) == (2, 5, 0.4)
    assert info["aux_defined"] and info["main_defined"] and info["syntax_ok"]
    assert info["calls_aux"] and not info["thin_wrapper"] and not info["discarded_aux_call"]
    assert info["sandbox_status"] == "ok" and info["task_id"] == "CoopHumanEval/0"
    assert info["program"].endswith(IS_BIG + "\n\n" + USES_AUX + "\n")
    # Turn 2 is the last: truncated, no new prompt, agents gone.
    observations, rewards, terms, truncs, infos = game.step({"helper": IS_PRIME, "main": USES_AUX})
    assert rewards["main"] == pytest.approx(0.0)
    assert truncs == {"helper": True, "main": True} and not any(terms.values())
    assert observations["main"]["messages"][-1] == {"role": "assistant", "content": USES_AUX}
    assert infos["main"]["turn"] == 2 and game.agents == [] and game.done
    with pytest.raises(RuntimeError, match="after the episode ended"):
        game.step({"helper": "", "main": ""})


def test_termination_threshold_ends_early(x_or_y):
    game = parallel_env(problems=[x_or_y], num_turns=5, termination_threshold=3.5)
    game.reset(seed=0)
    _, rewards, terms, _, _ = game.step({"helper": IS_BIG, "main": USES_AUX})
    assert rewards["main"] == pytest.approx(3.4) and not any(terms.values())
    _, rewards, terms, truncs, _ = game.step({"helper": IS_PRIME, "main": USES_AUX})
    assert rewards["main"] == 4.0
    assert terms == {"helper": True, "main": True} and not any(truncs.values())
    assert game.agents == [] and len(game.history) == 2


def test_single_agent_scores_like_an_empty_helper(x_or_y):
    single = parallel_env(problems=[x_or_y], num_agents=1, num_turns=1)
    single.reset(seed=0)
    _, rewards, _, _, infos = single.step({"main": INLINE})
    assert rewards == {"main": pytest.approx(2.1)}
    assert infos["main"]["level1"] == 0.6 and not infos["main"]["aux_defined"]
    pair = parallel_env(problems=[x_or_y], num_turns=1)
    pair.reset(seed=0)
    _, pair_rewards, _, _, _ = pair.step({"helper": "", "main": INLINE})
    assert pair_rewards["main"] == rewards["main"]


@pytest.mark.parametrize(
    ("actions", "error", "message"),
    [
        ({"main": USES_AUX}, ValueError, r"missing \['helper'\]"),
        ({"helper": "", "main": "", "critic": ""}, ValueError, r"unknown \['critic'\]"),
        ({"helper": None, "main": ""}, TypeError, "must be its text"),
        ([USES_AUX], TypeError, "dict"),
    ],
)
def test_bad_joint_actions(actions, error, message, x_or_y):
    game = parallel_env(problems=[x_or_y])
    with pytest.raises(RuntimeError, match="before reset"):
        game.step({"helper": "", "main": ""})
    game.reset(seed=0)
    with pytest.raises(error, match=message):
        game.step(actions)


def test_the_aec_form_checks_each_step_at_once(x_or_y):
    game = raw_env(problems=[x_or_y], num_turns=1)
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\): CodeCollabAECEnv has"):
        game.step("")
    game.reset(seed=0)
    # Refused at the helper's own step, leaving the turn untouched (it used to be
    # stored and fail at main's step, or be taken for a dead step).
    for action in (3, None, b"def aux(): pass"):
        with pytest.raises(TypeError, match="the action of helper must be its text"):
            game.step(action)
        assert game.agent_selection == "helper"
    game.step("")
    game.step("")
    for _agent in list(game.agents):
        game.step(None)  # the dead steps
    with pytest.raises(RuntimeError, match="step\\(\\) after the episode ended"):
        game.step("")


def test_any_text_is_a_legal_action(x_or_y):
    game = parallel_env(problems=[x_or_y], num_turns=3)
    game.reset(seed=0)
    for text in ("", "ü" * 1000, "```", "<think>", "\x00", "def x_or_y(:"):
        _, rewards, _, _, infos = game.step({"helper": text, "main": text})
        assert rewards["main"] == 0.0 and infos["main"]["sandbox_status"] == "not_run"
        if not game.agents:
            game.reset(seed=0)


def test_test_timeout_is_configurable(x_or_y):
    game = parallel_env(problems=[x_or_y], num_turns=1, timeout=0.5)
    game.reset(seed=0)
    endless = "def x_or_y(n, x, y):\n    while True:\n        pass"
    _, rewards, _, _, infos = game.step({"helper": IS_PRIME, "main": endless})
    assert infos["main"]["sandbox_status"] == "timeout"
    assert rewards["main"] == pytest.approx(0.4 + 0.5)  # aux 0.4, no return in main, compiles


# ---------------------------------------------------------------------------------- fork


def test_fork_is_independent_and_cheap(x_or_y):
    game = parallel_env(problems=[x_or_y], num_turns=3)
    game.reset(seed=0)
    game.step({"helper": IS_BIG, "main": USES_AUX})
    clone = game.fork()
    before = clone.observe("main")
    # Siblings: the original and the fork take different joint actions from one state.
    _, original_rewards, *_ = game.step({"helper": IS_PRIME, "main": USES_AUX})
    _, fork_rewards, *_ = clone.step({"helper": IS_BIG, "main": INLINE})
    # INLINE is right without aux: 1.0 + 0.5 + 1.0, no bonus.
    assert original_rewards["main"] == 4.0 and fork_rewards["main"] == 2.5
    assert clone.observe("main")["messages"][: len(before["messages"])] == before["messages"]
    assert clone.observe("main")["messages"][-2]["content"] == INLINE
    assert game.observe("main")["messages"][-2]["content"] == USES_AUX
    assert len(game.history) == len(clone.history) == 2
    assert game.history[1].actions != clone.history[1].actions
    # Shared, not copied: the problems, the sandbox setting and the config.
    assert clone.config is game.config and clone.sandbox is game.sandbox


def test_deepcopy_forks_and_keeps_the_random_state(che):
    pool = default_sandbox()
    game = parallel_env(problems=list(che.values()), sandbox=pool)
    game.reset(seed=11)
    clone = copy.deepcopy(game)
    assert clone.sandbox is pool
    game.reset()
    clone.reset()
    assert clone.problem == game.problem  # the generator state was copied, not shared
    game.reset()
    assert clone.problem != game.problem or len(che) == 1


def test_aec_fork_mid_cycle(x_or_y):
    aec = env(problems=[x_or_y], num_turns=2)
    aec.reset(seed=0)
    aec.step(IS_BIG)  # helper acted; main is pending
    clone = aec.unwrapped.fork()
    assert clone.agent_selection == "main"
    aec.step(USES_AUX)
    clone.step(INLINE)
    assert aec.unwrapped.parallel_env.history[0].actions["main"] == USES_AUX
    assert clone.parallel_env.history[0].actions["main"] == INLINE
    assert aec.rewards["main"] == pytest.approx(3.4)
    assert clone.rewards["main"] == 2.5


def test_step_batch_matches_sequential_steps(x_or_y):
    roots = [parallel_env(problems=[x_or_y], num_turns=2) for _ in range(2)]
    for root in roots:
        root.reset(seed=0)
    joint = [
        {"helper": IS_PRIME, "main": USES_AUX},
        {"helper": IS_BIG, "main": USES_AUX},
        {"helper": IS_PRIME, "main": INLINE},
    ]
    batch_envs = [roots[0].fork() for _ in joint]
    sequential_envs = [roots[1].fork() for _ in joint]
    batched = step_batch(batch_envs, joint)
    sequential = [e.step(a) for e, a in zip(sequential_envs, joint, strict=True)]
    assert batched == sequential
    assert [r[1]["main"] for r in batched] == [4.0, pytest.approx(3.4), 2.5]
    with pytest.raises(ValueError, match="appears twice"):
        step_batch([batch_envs[0], batch_envs[0]], joint[:2])
    with pytest.raises(ValueError, match="give one each"):
        step_batch(batch_envs, joint[:2])


# ------------------------------------------------------------ a pair that learns from feedback


def test_scripted_pair_fixes_its_code_after_level_feedback(x_or_y):
    game = env(problems=[x_or_y], num_turns=3, render_mode="ansi")
    helper = ScriptedCoder([IS_BIG, IS_PRIME])
    main = ScriptedCoder(USES_AUX)
    seen = play_aec(
        game, lambda agent, obs, info: {"helper": helper, "main": main}[agent](obs, info)
    )
    rewards = [(agent, reward) for agent, _, reward, *_ in seen]
    # Turn 1: 2/5 tests (3.4). The slice shows the first test failing; the helper
    # revises and turn 2 scores 4.0; turn 3 keeps it. Rewards reach an agent at
    # its next last(); the final one at its dead step.
    assert rewards == [
        ("helper", 0),
        ("main", 0),
        ("helper", pytest.approx(3.4)),
        ("main", pytest.approx(3.4)),
        ("helper", 4.0),
        ("main", 4.0),
        ("helper", 4.0),
        ("main", 4.0),
    ]
    history = game.unwrapped.parallel_env.history
    assert [r.actions["helper"] for r in history] == [IS_BIG, IS_PRIME, IS_PRIME]
    first_feedback = history[0].feedback["helper"]
    assert "- Tests (the first 1 of 5): 0/1 passed" in first_feedback
    assert first_feedback == level_feedback(history[0].evaluation, "helper")
    transcript = game.render()
    assert transcript.count("=== Turn") == 3 and "ended after 3 turn(s)" in transcript


def test_render_modes(x_or_y):
    quiet = parallel_env(problems=[x_or_y])
    quiet.reset(seed=0)
    with pytest.warns(UserWarning, match="without a render_mode"):
        assert quiet.render() is None
    loud = parallel_env(problems=[x_or_y], render_mode="ansi")
    loud.reset(seed=0)
    assert loud.render() == "Problem CoopHumanEval/0 (entry point x_or_y)"


def test_record_shows_code_tests_and_feedback_per_turn(x_or_y):
    import json

    game = parallel_env(problems=[x_or_y], num_turns=2)
    game.reset(seed=0)
    game.step({"helper": IS_BIG, "main": USES_AUX})
    game.step(
        {"helper": "no code here", "main": "def x_or_y(n, x, y):\n    return x if aux(n) else"}
    )
    record = json.loads(json.dumps(game.record()))
    assert record["env"] == "code_collab_v0" and record["title"] == "CoopHumanEval/0 (x_or_y)"
    summary = record["summary"]
    assert summary["rewards"] == [pytest.approx(3.4), pytest.approx(0.6)]
    assert summary["pass_rates"] == [0.4, 0.0] and summary["solved"] is False
    assert [(t["agent"], t["round"]) for t in record["turns"]] == [
        ("helper", 1), ("main", 1), ("helper", 2), ("main", 2)
    ]  # fmt: skip
    helper1, main1, helper2, main2 = (t["details"] for t in record["turns"])
    # Turn 1: the wrong aux passes the tests on 1 and 13 only; the feedback shows the first.
    assert helper1["code"] == IS_BIG and "Revise your `aux(...)`" in helper1["feedback"]
    assert main1["tests"] == "2/5 passed" and main1["sandbox_status"] == "ok"
    assert main1["test_results"][0].startswith("failed (AssertionError: assert 12 == 34): ")
    assert main1["test_results"][3] == "passed: assert candidate(1, 100, 200) == 200"
    assert main1["program"] == f"{IS_BIG}\n\n{USES_AUX}\n" and main1["reward"] == pytest.approx(3.4)
    # Turn 2: prose and a broken main; nothing runs, and the last turn gets no feedback.
    assert helper2["code"] is None and main2["syntax_error"].startswith("line 2")
    assert main2["test_results"] == [f"not_run: {t}" for t in x_or_y.tests]
    assert main2["feedback"] is None and "program" in main2
    # Each turn's prompt is the chat the agent was sampled on.
    prompts = [t["prompt"] for t in record["turns"]]
    assert [len(p) for p in prompts] == [1, 1, 3, 3]
    assert prompts[2][1] == {"role": "assistant", "content": IS_BIG}
    assert prompts[2][2]["content"] == helper1["feedback"]
