"""Sampling context vs training context, strategy by strategy (the plan's "Core idea").

Each test states exactly what the observation and ``info["training_messages"]``
hold: the help (augmentation, hint, feedback) appears only in the sampling
context, and the completion text is never altered.
"""

from __future__ import annotations

import pytest

from llm_envs.contract import TRAINING_MESSAGES
from llm_envs.expert_iteration import (
    ExpertIterationEnv,
    PromptSettings,
    Strategy,
    first_attempt_context,
    second_attempt_context,
)
from llm_envs.expert_iteration.prompts import (
    DEFAULT_AUGMENTATION,
    default_revise_message,
    problem_text,
)
from llm_envs.tasks import CodeProblem, MathProblem

PROBLEM = MathProblem("demo/0", "What is 17 + 4?", "21", solution="17 + 4 = 21\nSo 21.")
PLAIN = [{"role": "user", "content": "What is 17 + 4?\n\nPut your final answer within \\boxed{}."}]
HINT_PREFACE = "Hint (for you only: solve the problem yourself and do not mention this hint):"
CODE = CodeProblem(
    "demo/code",
    'def inc(x):\n    """Add one to x."""\n',
    "inc",
    ("assert inc(1) == 2", "assert inc(-1) == 0"),
    canonical_solution="    return x + 1\n",
)


def first_turn(strategy, problem=PROBLEM, **kwargs):
    """The observation and infos of the solver's first turn in a fresh episode."""
    ei = ExpertIterationEnv(strategy=strategy, **kwargs)
    ei.reset(seed=0, options={"problem": problem})
    return ei.observe("solver")["messages"], ei.infos["solver"]


# ---------------------------------------------------------------- single-turn strategies


def test_iid_has_no_swap():
    observation, info = first_turn("iid")
    assert observation == PLAIN
    assert TRAINING_MESSAGES not in info
    assert info["strategy"] == "iid"


def test_prompt_augmentation_text_only_in_the_sampling_context():
    observation, info = first_turn("prompt_augmentation", augmentation="Show every step.")
    assert observation == [
        {"role": "user", "content": PLAIN[0]["content"] + "\n\nShow every step."}
    ]
    assert info[TRAINING_MESSAGES] == PLAIN
    assert info["strategy"] == "prompt_augmentation"


def test_prompt_augmentation_default_text():
    observation, info = first_turn("prompt_augmentation")
    assert observation[0]["content"] == PLAIN[0]["content"] + "\n\n" + DEFAULT_AUGMENTATION
    assert info[TRAINING_MESSAGES] == PLAIN


def test_prompt_augmentation_messages_are_a_sampling_prefix():
    # The plan's sampling_convo_prefix: few-shot messages before the problem, after the system.
    shots = (
        {"role": "user", "content": "What is 1 + 1?"},
        {"role": "assistant", "content": "1 + 1 = \\boxed{2}"},
    )
    observation, info = first_turn("prompt_augmentation", augmentation=shots, system_prompt="S")
    system = {"role": "system", "content": "S"}
    assert observation == [system, *shots, PLAIN[0]]
    assert info[TRAINING_MESSAGES] == [system, PLAIN[0]]


@pytest.mark.parametrize(
    ("hint", "shown"),
    [
        ("answer", "the correct final answer is 21."),
        ("solution", "a correct solution goes\n17 + 4 = 21\nSo 21."),
        ("partial_solution", "a correct solution goes\n17 + 4 = 21"),
    ],
)
def test_answer_hint_only_in_the_sampling_context(hint, shown):
    observation, info = first_turn("answer_hint", hint=hint)
    assert observation == [
        {"role": "user", "content": f"{PLAIN[0]['content']}\n\n{HINT_PREFACE} {shown}"}
    ]
    assert info[TRAINING_MESSAGES] == PLAIN


def test_answer_hint_without_a_worked_solution_falls_back_to_the_answer():
    bare = MathProblem("demo/1", "What is 2 * 3?", "6")
    observation, _ = first_turn("answer_hint", problem=bare, hint="partial_solution")
    assert observation[0]["content"].endswith(f"{HINT_PREFACE} the correct final answer is 6.")


def test_answer_hint_custom_template_keeps_braces():
    observation, _ = first_turn("answer_hint", hint_template=r"Psst: \boxed{{hint}}")
    assert observation[0]["content"].endswith(r"Psst: \boxed{21}")


def test_answer_hint_on_code_shows_the_reference_program():
    observation, info = first_turn("answer_hint", problem=CODE)
    program = 'def inc(x):\n    """Add one to x."""\n    return x + 1'
    assert observation[0]["content"] == (
        f"{problem_text(CODE)}\n\n{HINT_PREFACE} a correct solution is\n```python\n{program}\n```"
    )
    assert info[TRAINING_MESSAGES] == [{"role": "user", "content": problem_text(CODE)}]


def test_answer_hint_on_code_without_reference_is_a_clear_error():
    bare = CodeProblem("demo/bare", "def f():\n    pass\n", "f", ("assert f() is None",))
    with pytest.raises(ValueError, match=r"'demo/bare' has no canonical_solution"):
        first_turn("answer_hint", problem=bare)


def test_system_prompt_is_in_both_contexts():
    observation, info = first_turn("answer_hint", system_prompt="You solve math.")
    assert observation[0] == {"role": "system", "content": "You solve math."}
    assert info[TRAINING_MESSAGES] == [{"role": "system", "content": "You solve math."}, *PLAIN]


# ------------------------------------------------------------------- two-turn feedback


def play_two_turns(training_context, first="I think \\boxed{22}.", second="\\boxed{21}", **kw):
    """Play a verifier-feedback episode; return what the solver saw before each attempt."""
    ei = ExpertIterationEnv(strategy="two_turn_feedback", training_context=training_context, **kw)
    ei.reset(seed=0, options={"problem": PROBLEM})
    seen = [(ei.observe("solver")["messages"], dict(ei.infos["solver"]))]
    ei.step(first)
    seen.append((ei.observe("solver")["messages"], dict(ei.infos["solver"])))
    ei.step(second)
    return ei, seen


def test_two_turn_attempt1_is_the_plain_problem():
    _, [(observation, info), _] = play_two_turns("problem+attempt1")
    assert observation == PLAIN
    assert TRAINING_MESSAGES not in info


def test_two_turn_problem_plus_attempt1_drops_only_the_feedback():
    first = "I think 17 + 4 = \\boxed{22}.  "  # trailing spaces: the text is kept verbatim
    _, [_, (observation, info)] = play_two_turns("problem+attempt1", first=first)
    revise = default_revise_message(PROBLEM)
    assert observation == [
        *PLAIN,
        {"role": "assistant", "content": first},
        {
            "role": "user",
            "content": f"Feedback on your answer:\nYour final answer, 22, is wrong.\n\n{revise}",
        },
    ]
    assert info[TRAINING_MESSAGES] == [
        *PLAIN,
        {"role": "assistant", "content": first},
        {"role": "user", "content": revise},
    ]


def test_two_turn_problem_context_trains_attempt2_as_a_first_answer():
    _, [_, (observation, info)] = play_two_turns("problem")
    assert len(observation) == 3
    assert info[TRAINING_MESSAGES] == PLAIN


def test_two_turn_custom_revise_message():
    _, [_, (observation, info)] = play_two_turns("problem+attempt1", revise_message="Again.")
    assert observation[-1]["content"].endswith("\n\nAgain.")
    assert info[TRAINING_MESSAGES][-1] == {"role": "user", "content": "Again."}


def test_training_context_differs_from_sampling_context_by_exactly_the_help():
    """Text-level statement of the swap: remove the help and the contexts are equal."""
    settings = PromptSettings(augmentation="Extra.", revise_message="Revise.")
    for strategy, help_text in [
        (Strategy.PROMPT_AUGMENTATION, "\n\nExtra."),
        (Strategy.ANSWER_HINT, f"\n\n{HINT_PREFACE} the correct final answer is 21."),
    ]:
        ctx = first_attempt_context(strategy, PROBLEM, settings)
        sampled = ctx.observation[-1]["content"]
        assert help_text in sampled
        assert sampled.replace(help_text, "") == ctx.training_messages[-1]["content"]
    ctx = second_attempt_context(PROBLEM, "a1", "Wrong.", settings)
    sampled = ctx.observation[-1]["content"]
    assert sampled.replace("Feedback on your answer:\nWrong.\n\n", "") == "Revise."
    assert ctx.training_messages[:-1] == ctx.observation[:-1]


def test_attempt_texts_are_never_altered():
    """Completions with odd whitespace, markup and Unicode reach every context verbatim."""
    first = "  \n<think>ü</think>\r\n\\boxed{ 22 } \t"
    ei, _ = play_two_turns("problem+attempt1", first=first, second="\n\\boxed{21}\n")
    final = ei.observe("solver")["messages"]
    assert final[1] == {"role": "assistant", "content": first}
    assert final[3] == {"role": "assistant", "content": "\n\\boxed{21}\n"}
    assert ei.attempts[0].context.training_messages == PLAIN
    assert ei.attempts[1].context.training_messages[1]["content"] == first


def test_observations_and_infos_are_copies():
    ei = ExpertIterationEnv(strategy="answer_hint")
    ei.reset(seed=0, options={"problem": PROBLEM})
    ei.observe("solver")["messages"][0]["content"] = "changed"
    ei.infos["solver"][TRAINING_MESSAGES][0]["content"] = "changed"
    assert ei.observe("solver")["messages"][0]["content"].startswith("What is 17 + 4?")
    assert ei.attempts == []
    ei.step("\\boxed{21}")
    assert ei.attempts[0].context.training_messages == PLAIN
