"""Pure reward functions: pairwise votes (debate) and code levels (code collaboration)."""

from llm_envs.rewards.code import CodeRewardBreakdown, team_reward
from llm_envs.rewards.pairwise import (
    PAIRWISE_REWARDS,
    PairwiseResult,
    PairwiseRewardFn,
    RewardMode,
    Vote,
    VoteCounting,
    get_pairwise_reward,
    is_valid_vote,
    once_per_voter_and_pair,
    win_minus_loss,
    win_rate,
)

__all__ = [
    "PAIRWISE_REWARDS",
    "CodeRewardBreakdown",
    "PairwiseResult",
    "PairwiseRewardFn",
    "RewardMode",
    "Vote",
    "VoteCounting",
    "get_pairwise_reward",
    "is_valid_vote",
    "once_per_voter_and_pair",
    "team_reward",
    "win_minus_loss",
    "win_rate",
]
