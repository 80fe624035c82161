"""Seeds and orders a family derives from a run's seed: the same run, the same episodes.

A family's plans, its scripted players and the trainers draw their numbers
from seeds mixed here, never from a global generator, so two runs with one
seed play the same problems in the same order on any machine.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["derive_seed", "ordered"]


def derive_seed(*keys: int) -> int:
    """A 31-bit seed that depends on every key (numpy's ``SeedSequence`` mixing).

    Example:
        >>> derive_seed(0, 1) == derive_seed(0, 1) != derive_seed(1, 0)
        True
    """
    return int(np.random.SeedSequence([int(k) & 0xFFFFFFFF for k in keys]).generate_state(1)[0])


def ordered(items: Sequence[Any], index: int, seed: int) -> Any:
    """Item ``index`` of an endless stream of seeded permutations of ``items`` (epochs).

    Example:
        >>> sorted(ordered("abc", i, seed=0) for i in range(3))
        ['a', 'b', 'c']
    """
    epoch, position = divmod(index, len(items))
    return items[int(_permutation(len(items), seed & 0xFFFFFFFF, epoch)[position])]


@functools.lru_cache(maxsize=4)
def _permutation(size: int, seed: int, epoch: int) -> np.ndarray:
    # Kept: a trainer asks for one group after another of the same epoch, and a
    # million-problem task costs 20 ms a permutation.
    return np.random.default_rng([seed, epoch]).permutation(size)
