"""Reward wrappers and views over llm-envs environments."""

from llm_envs.wrappers.pairwise import (
    REWARD_WRAPPERS,
    PairwiseRewardWrapper,
    WinMinusLossReward,
    WinRateReward,
)
from llm_envs.wrappers.shaping import SHAPING_TERMS, DebateShaping, judge_score, shaping_reward

__all__ = [
    "REWARD_WRAPPERS",
    "SHAPING_TERMS",
    "DebateShaping",
    "PairwiseRewardWrapper",
    "WinMinusLossReward",
    "WinRateReward",
    "judge_score",
    "shaping_reward",
]
