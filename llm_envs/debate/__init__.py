"""Multi-agent debate: N agents answer in turn, judge each other, and vote (the debate recipe).

>>> from llm_envs.debate import env
>>> debate = env(num_agents=3, max_rounds=2)
"""

from llm_envs.debate.agents import (
    JudgingDebater,
    MalformedDebater,
    ScriptedDebater,
    StubbornDebater,
    format_answer,
    question_in,
    scripted_debaters,
)
from llm_envs.debate.env import DebateConfig, DebateEnv, env, raw_env
from llm_envs.debate.protocol import STOP, DebateResponse, ParseError, parse_response
from llm_envs.debate.questions import DEFAULT_QUESTIONS, DebateQuestion
from llm_envs.debate.rewards import (
    PAIRWISE_REWARDS,
    PairwiseResult,
    PairwiseRewardFn,
    RewardMode,
    VoteCounting,
    get_pairwise_reward,
    once_per_voter_and_pair,
    win_minus_loss,
    win_rate,
)
from llm_envs.debate.shaping import SHAPING_TERMS, DebateShaping, judge_score, shaping_reward
from llm_envs.debate.wrappers import (
    REWARD_WRAPPERS,
    PairwiseRewardWrapper,
    WinMinusLossReward,
    WinRateReward,
)
from llm_envs.judgements import Vote, is_valid_vote

__all__ = [
    "DEFAULT_QUESTIONS",
    "PAIRWISE_REWARDS",
    "REWARD_WRAPPERS",
    "SHAPING_TERMS",
    "STOP",
    "DebateConfig",
    "DebateEnv",
    "DebateQuestion",
    "DebateResponse",
    "DebateShaping",
    "JudgingDebater",
    "MalformedDebater",
    "PairwiseResult",
    "PairwiseRewardFn",
    "PairwiseRewardWrapper",
    "ParseError",
    "RewardMode",
    "ScriptedDebater",
    "StubbornDebater",
    "Vote",
    "VoteCounting",
    "WinMinusLossReward",
    "WinRateReward",
    "env",
    "format_answer",
    "get_pairwise_reward",
    "is_valid_vote",
    "judge_score",
    "once_per_voter_and_pair",
    "parse_response",
    "question_in",
    "raw_env",
    "scripted_debaters",
    "shaping_reward",
    "win_minus_loss",
    "win_rate",
]
