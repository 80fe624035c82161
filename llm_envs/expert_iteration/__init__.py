"""Expert iteration: search strategies whose sampling context differs from training.

>>> from llm_envs.expert_iteration import env
>>> ei = env(strategy="two_turn_feedback", training_context="problem+attempt1")
"""

from llm_envs.expert_iteration.agents import (
    ScriptedCodeSolver,
    ScriptedCritic,
    ScriptedMathSolver,
    evaluate_arithmetic,
    is_negative_feedback,
)
from llm_envs.expert_iteration.env import (
    CRITIC,
    SOLVER,
    ExpertIterationConfig,
    ExpertIterationEnv,
    OnFirstCorrect,
    env,
    raw_env,
)
from llm_envs.expert_iteration.groups import (
    EpisodePlan,
    EpisodeSpec,
    StrategyMix,
    normalize_mix,
    plan_group,
    plan_groups,
)
from llm_envs.expert_iteration.strategies import (
    FeedbackSource,
    HintMode,
    PromptSettings,
    Strategy,
    TrainingContext,
    TurnContext,
    first_attempt_context,
    second_attempt_context,
)
from llm_envs.expert_iteration.verifier import CodeReward, CodeRunner, Verdict

__all__ = [
    "CRITIC",
    "SOLVER",
    "CodeReward",
    "CodeRunner",
    "EpisodePlan",
    "EpisodeSpec",
    "ExpertIterationConfig",
    "ExpertIterationEnv",
    "FeedbackSource",
    "HintMode",
    "OnFirstCorrect",
    "PromptSettings",
    "ScriptedCodeSolver",
    "ScriptedCritic",
    "ScriptedMathSolver",
    "Strategy",
    "StrategyMix",
    "TrainingContext",
    "TurnContext",
    "Verdict",
    "env",
    "evaluate_arithmetic",
    "first_attempt_context",
    "is_negative_feedback",
    "normalize_mix",
    "plan_group",
    "plan_groups",
    "raw_env",
    "second_attempt_context",
]
