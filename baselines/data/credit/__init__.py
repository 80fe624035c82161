"""Multi-agent credit assignment: what each trajectory's return is measured against.

A *scheme* turns the returns of a batch of trajectory groups into advantages.
Each is a pure function of numpy arrays and plain values; the running baselines
of ``role_baseline`` are an explicit state value (:class:`RoleBaselines`),
passed in and returned, so a trainer can checkpoint them. With R_i the return
of trajectory i (step rewards plus final reward), s_i its seat (its agent id)
and g its group:

``group_mean`` (the debate recipe, "Advantage Computation"; the default)
    ``A_i = R_i - mean_{j in g} R_j``, optionally over ``std_g + epsilon``
    (population std): :func:`baselines.data.advantages.center_advantages`, exactly.

``role_baseline`` (SPIRAL, "Role-conditioned Advantage Estimation")
    ``A_i = R_i - b[env, s_i]`` with b the baseline from *before* the batch, then
    ``b[env, k] <- decay**n_k * b[env, k] + (1 - decay**n_k) * mean_k(R)`` over the
    ``n_k`` returns of seat k in the batch (:func:`update_role_baselines`). A
    baseline starts at 0 and ``decay`` is per return (SPIRAL's EMA, 0.95).

``per_agent_norm`` (Dr. MAS, agent-wise advantage normalization)
    ``A_i = (R_i - mu_{g,s_i}) / (sigma_{g,s_i} + epsilon)``: mean and population
    std over the trajectories of seat ``s_i`` in group g (:func:`per_agent_advantages`).

``agent_turn_groups`` (AT-GRPO, agent- and turn-wise grouping)
    every turn t of a trajectory gets its own advantage, compared only with turn t
    of the same seat in the same group: ``A_{i,t} = G_{i,t} - mean G_{j,t}`` over
    the trajectories j of g with ``s_j = s_i`` that have a turn t, optionally over
    ``std + epsilon``; ``G_{i,t} = sum_{t' >= t} r_{i,t'} + final_i`` is the return
    from turn t on (:func:`turn_returns`, :func:`agent_turn_advantages`). A turn
    is the agent's own t-th turn.

In every scheme but ``group_mean`` a comparison set whose values are all equal
gives exactly 0 (and one member alone has nothing to be compared with), and
means and stds are exact sums (:func:`math.fsum`), so permuting trajectories
permutes their advantages and nothing else.

Where this differs from the papers' code, on purpose: SPIRAL folds returns into
its EMA one at a time, each trajectory measured against the baseline of those
before it; here a batch is measured against the baseline from before the
batch (no trajectory's own return or batch-mates are in its baseline, and the
order inside a batch does not matter), and its n returns of a seat enter as n
EMA steps at their mean. Dr. MAS's code divides by the sample std (verl's
GRPO); here it is the population std, as in
:func:`~baselines.data.advantages.center_advantages`. AT-GRPO samples several
actions from one state at every turn; here the same seat's same turn in the
group's other episodes stands in for them.

:func:`assign_credit` runs a scheme of :data:`CREDIT_SCHEMES` on a batch of
:class:`~baselines.types.TrajectoryGroup` and returns a :class:`Credit`, which
:func:`baselines.data.datums.assemble_training_data` puts on the tokens.
Nothing here imports torch, reads tokens or names an environment: seats are
trajectories' ``agent_id`` and the environment is a name the caller gives.
"""

from baselines.data.credit import registry, role_baselines, schemes
from baselines.data.credit.registry import *  # noqa: F403
from baselines.data.credit.role_baselines import *  # noqa: F403
from baselines.data.credit.schemes import *  # noqa: F403

__all__ = registry.__all__ + role_baselines.__all__ + schemes.__all__
