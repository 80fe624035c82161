"""Scripted text agents for demos and tests: no model, deterministic for a seed."""

from llm_envs.agents.coders import CanonicalCoder, GarbageCoder, ScriptedCoder, reference_solution
from llm_envs.agents.debaters import (
    JudgingDebater,
    MalformedDebater,
    ScriptedDebater,
    StubbornDebater,
    TextAgent,
    format_answer,
    question_in,
    scripted_debaters,
)
from llm_envs.agents.solvers import (
    ScriptedCodeSolver,
    ScriptedCritic,
    ScriptedMathSolver,
    evaluate_arithmetic,
    is_negative_feedback,
)

__all__ = [
    "CanonicalCoder",
    "GarbageCoder",
    "JudgingDebater",
    "MalformedDebater",
    "ScriptedCodeSolver",
    "ScriptedCoder",
    "ScriptedCritic",
    "ScriptedDebater",
    "ScriptedMathSolver",
    "StubbornDebater",
    "TextAgent",
    "evaluate_arithmetic",
    "format_answer",
    "is_negative_feedback",
    "question_in",
    "reference_solution",
    "scripted_debaters",
]
