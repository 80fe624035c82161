"""Code collaboration (the MAGRPO paper): a helper writes ``aux``, a main agent the entry point.

>>> from llm_envs.code_collab import parallel_env
>>> game = parallel_env(problems="coophumaneval", num_turns=2)  # doctest: +SKIP
"""

from llm_envs.code_collab.agents import (
    CanonicalCoder,
    GarbageCoder,
    ScriptedCoder,
    reference_solution,
)
from llm_envs.code_collab.env import (
    DATASETS,
    CodeCollabAECEnv,
    CodeCollabConfig,
    CodeCollabEnv,
    TurnRecord,
    env,
    load_problems,
    parallel_env,
    raw_env,
    step_batch,
)
from llm_envs.code_collab.experts import (
    Expert,
    ExpertError,
    OpenAIChatExpert,
    expert_prompt,
    parse_expert_reply,
)
from llm_envs.code_collab.feedback import (
    EXTERNAL_MODES,
    ExpertEdits,
    ExternalMode,
    SandboxSlice,
    edits_for,
    expert_feedback,
    feedback_reports_failure,
    level_feedback,
    plain_feedback,
    shown_tests,
)
from llm_envs.code_collab.prompts import HELPER, MAIN, Role, first_prompt, revise_instruction
from llm_envs.code_collab.rewards import CodeRewardBreakdown, team_reward

__all__ = [
    "DATASETS",
    "EXTERNAL_MODES",
    "HELPER",
    "MAIN",
    "CanonicalCoder",
    "CodeCollabAECEnv",
    "CodeCollabConfig",
    "CodeCollabEnv",
    "CodeRewardBreakdown",
    "Expert",
    "ExpertEdits",
    "ExpertError",
    "ExternalMode",
    "GarbageCoder",
    "OpenAIChatExpert",
    "Role",
    "SandboxSlice",
    "ScriptedCoder",
    "TurnRecord",
    "edits_for",
    "env",
    "expert_feedback",
    "expert_prompt",
    "feedback_reports_failure",
    "first_prompt",
    "level_feedback",
    "load_problems",
    "parallel_env",
    "parse_expert_reply",
    "plain_feedback",
    "raw_env",
    "reference_solution",
    "revise_instruction",
    "shown_tests",
    "step_batch",
    "team_reward",
]
