r"""Prompt text of the expert-iteration environment (the expert-iteration plan).

Pure functions from a problem (and attempts, feedback) to strings. Which
message goes into the *sampling* context and which into the *training* context
is decided by :mod:`llm_envs.expert_iteration.strategies`; this module only
decides how each message reads. Nothing here checks an answer: that is
:mod:`llm_envs.expert_iteration.verifier`.

Every default text can be replaced through the environment's configuration
(``augmentation``, ``hint_template``, ``revise_message``, ``system_prompt``).
"""

from __future__ import annotations

from llm_envs.tasks.problems import CodeProblem, MathProblem

__all__ = [
    "CRITIC_SYSTEM_PROMPT",
    "DEFAULT_AUGMENTATION",
    "Problem",
    "critic_user_message",
    "default_hint_template",
    "default_revise_message",
    "feedback_message",
    "problem_text",
]

Problem = MathProblem | CodeProblem
"""A problem the environment can pose: a math question or a code task."""

DEFAULT_AUGMENTATION = (
    "Think step by step. Check every step of your work carefully before you give your final answer."
)
"""The extra instructions of the ``prompt_augmentation`` strategy when none are configured."""

MATH_FORMAT = "Put your final answer within \\boxed{}."
CODE_FORMAT = "Reply with the whole function in a ```python code block."

CRITIC_SYSTEM_PROMPT = (
    "You are a careful reviewer. You read a problem and a proposed answer to it, and "
    "you write short feedback for the author of the answer: say whether the answer is "
    "right and, if it is not, what is wrong with it. Do not write a corrected answer "
    "yourself."
)
"""The critic agent's system message (``feedback_source="critic"``)."""


def problem_text(problem: Problem) -> str:
    r"""The user message that poses ``problem``: the plain prompt, in every context.

    Math problems ask for a ``\boxed{}`` final answer (the first rule of
    :func:`~llm_envs.tasks.math_answers.extract_answer`); code problems show
    the function stub and ask for the whole function in a fenced block.

    Example:
        >>> print(problem_text(MathProblem("t", "What is 2 + 3?", "5")))
        What is 2 + 3?
        <BLANKLINE>
        Put your final answer within \boxed{}.
    """
    if isinstance(problem, CodeProblem):
        return (
            "Complete the following Python function.\n\n"
            f"```python\n{problem.prompt.strip(chr(10))}\n```\n\n{CODE_FORMAT}"
        )
    return f"{problem.question}\n\n{MATH_FORMAT}"


def default_hint_template(problem: Problem, kind: str) -> str:
    """The hint paragraph of ``answer_hint``, with a ``{hint}`` placeholder.

    Args:
        problem: the problem (its type picks the wording).
        kind: ``"answer"`` (a final answer or a whole program) or ``"solution"``
            (a worked solution, possibly partial).
    """
    preface = "Hint (for you only: solve the problem yourself and do not mention this hint):"
    if isinstance(problem, CodeProblem):
        if kind == "answer":
            return f"{preface} a correct solution is\n```python\n{{hint}}\n```"
        return f"{preface} a correct solution begins with\n```python\n{{hint}}\n```"
    if kind == "answer":
        return f"{preface} the correct final answer is {{hint}}."
    return f"{preface} a correct solution goes\n{{hint}}"


def default_revise_message(problem: Problem) -> str:
    r"""The user message before attempt 2 that carries no feedback.

    It closes the feedback message in the sampling context and replaces it in
    the ``"problem+attempt1"`` training context (see
    :func:`llm_envs.expert_iteration.strategies.second_attempt_contexts`).

    Example:
        >>> default_revise_message(MathProblem("t", "1 + 1?", "2"))
        'Review your answer above and give your final answer to the problem. Put your final answer within \\boxed{}.'
    """  # noqa: E501 (a doctest output line cannot be wrapped)
    fmt = CODE_FORMAT if isinstance(problem, CodeProblem) else MATH_FORMAT
    return f"Review your answer above and give your final answer to the problem. {fmt}"


def feedback_message(feedback: str, revise_message: str) -> str:
    """The user message of attempt 2's sampling context: the feedback, then the revise message.

    The revise message ends it so that dropping the feedback (the training
    context) leaves exactly ``revise_message``.

    Example:
        >>> print(feedback_message("Your final answer, 6, is wrong.", "Try again."))
        Feedback on your answer:
        Your final answer, 6, is wrong.
        <BLANKLINE>
        Try again.
    """
    body = feedback.strip() or "(no feedback)"
    return f"Feedback on your answer:\n{body}\n\n{revise_message}"


def critic_user_message(problem: Problem, attempt: str | None, reference: str | None) -> str:
    """The critic's user message: the problem, the attempt to review, and optionally the reference.

    Args:
        problem: the problem.
        attempt: the solver's attempt 1, verbatim; None before it exists.
        reference: the reference answer or program when the critic may see it.
    """
    if isinstance(problem, CodeProblem):
        parts = [f"Problem:\n```python\n{problem.prompt.strip(chr(10))}\n```"]
    else:
        parts = [f"Problem:\n{problem.question}"]
    if reference is not None:
        parts.append(f"Reference answer:\n{reference}")
    if attempt is None:
        parts.append("Proposed answer:\n(not written yet)")
    else:
        parts.append(f"Proposed answer:\n{attempt}")
        parts.append("Write your feedback on the proposed answer.")
    return "\n\n".join(parts)
