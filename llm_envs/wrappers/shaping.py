"""Opt-in reward shaping for the debate: partial credit that a small model can climb.

The debate's reward (seed 001) pays only for peer votes, and a parse error
costs -1. A model that never writes the five-tag contract gets the same -1 for
every answer, however close it came, so policy gradients have nothing to
follow. :class:`DebateShaping` adds, to every answer's step reward,

    ``contract * contract_score(answer) + correct * solution_correct``

where :func:`~llm_envs.debate.protocol.contract_score` is the fraction of the
contract's five parts written correctly (1 exactly when the answer parses) and
``solution_correct`` is 1 when the solution matches the question's reference
answer (questions without one add nothing).

This is *shaping*, not the seed's reward: it is off unless asked for
(``debate.env(shaping={"contract": 0.5})``), it composes with the pairwise
reward (both are added), and every shaped answer says what it added in its
infos under ``shaping/`` names (``shaping/contract``, ``shaping/correct``,
``shaping/reward``), so a metric built from them is never mistaken for the
win rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils import BaseWrapper

from llm_envs.arguments import check_number
from llm_envs.debate.protocol import contract_score

__all__ = ["SHAPING_TERMS", "DebateShaping", "shaping_reward"]

SHAPING_TERMS = ("contract", "correct")
"""The terms :class:`DebateShaping` can weigh, as ``debate.env(shaping=...)`` names them."""


def shaping_reward(
    text: str, solution_correct: bool | None, *, contract: float, correct: float
) -> float:
    """The shaping one debate answer earns (see the module docstring).

    Example:
        >>> shaping_reward("<solution>4</solution>", True, contract=0.5, correct=1.0)
        1.1
        >>> shaping_reward("no tags", None, contract=0.5, correct=1.0)
        0.0
    """
    return contract * contract_score(text) + correct * float(bool(solution_correct))


class DebateShaping(BaseWrapper[str, Any, Any]):
    """Adds partial credit for the contract and for a correct solution to each debate answer.

    Args:
        env: a debate environment (possibly wrapped, e.g. by a pairwise reward).
        contract: weight of :func:`~llm_envs.debate.protocol.contract_score`.
        correct: weight of a solution that matches the reference answer.

    Raises:
        TypeError: if ``env`` is not a debate (it has no ``turns`` record).
        ValueError: if a weight is negative or not finite, or both are 0.

    Example:
        >>> from llm_envs import debate
        >>> env = debate.env(num_agents=3, max_rounds=1, shaping={"contract": 0.5})
        >>> env.reset(seed=0)
        >>> env.step("<solution>4</solution> and then prose")
        >>> env.unwrapped.infos["agent_0"]["shaping/contract"]
        0.2
    """

    def __init__(self, env: AECEnv[str, Any, Any], *, contract: float = 0.5, correct: float = 0.0):
        if not hasattr(env.unwrapped, "turns") or not hasattr(env.unwrapped, "question"):
            raise TypeError(
                f"DebateShaping shapes debate answers, and {type(env.unwrapped).__name__} is "
                "not a debate; wrap llm_envs.debate.env()"
            )
        check_number("contract", contract, minimum=0)
        check_number("correct", correct, minimum=0)
        if contract == 0 and correct == 0:
            raise ValueError(
                "DebateShaping with contract=0 and correct=0 adds nothing; give a weight > 0 "
                "or leave the wrapper out (shaping=None)"
            )
        super().__init__(env)
        self.contract = float(contract)
        self.correct = float(correct)

    def step(self, action: Any) -> None:
        """Step the debate; when an answer was given, add its shaping to the author's reward."""
        base = self.env.unwrapped
        agent = base.agent_selection
        answered = (
            isinstance(action, str)
            and bool(base.agents)
            and not (base.terminations.get(agent) or base.truncations.get(agent))
        )
        self.env.step(action)
        if not answered:
            return
        info = base.infos[agent]
        reference = base.question.answer is not None
        contract = contract_score(action)
        correct = bool(info.get("solution_correct")) if reference else None
        bonus = shaping_reward(action, correct, contract=self.contract, correct=self.correct)
        base.rewards[agent] += bonus
        base._cumulative_rewards[agent] += bonus
        shaped: dict[str, float] = {"shaping/contract": contract, "shaping/reward": bonus}
        if correct is not None:
            shaped["shaping/correct"] = float(correct)
        base.infos[agent] = {**info, **shaped}


def check_shaping(shaping: Mapping[str, float] | None) -> dict[str, float] | None:
    """Validate ``debate.env(shaping=...)``: a mapping of :data:`SHAPING_TERMS` to weights.

    Example:
        >>> check_shaping({"contract": 0.5})
        {'contract': 0.5}
        >>> check_shaping({"format": 1.0})
        Traceback (most recent call last):
        ValueError: shaping has no term 'format'; its terms are ('contract', 'correct'), ...
    """
    if shaping is None:
        return None
    if not isinstance(shaping, Mapping):
        raise TypeError(
            f"shaping must be a mapping of term to weight or None, got {shaping!r:.60}; "
            "pass e.g. shaping={'contract': 0.5, 'correct': 0.5}"
        )
    for term in shaping:
        if term not in SHAPING_TERMS:
            raise ValueError(
                f"shaping has no term {term!r}; its terms are {SHAPING_TERMS}, "
                "e.g. shaping={'contract': 0.5, 'correct': 0.5}"
            )
    return {term: float(weight) for term, weight in shaping.items()}
