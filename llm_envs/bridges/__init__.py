"""Bridges: llm-envs environments as other RL ecosystems' environments, one module per ecosystem.

Every bridge plays one seat through :class:`~llm_envs.seats.SeatView` (the
family's reference players, or the bridge's other clients, in the other
seats) and exchanges text only: an environment never sees tokens.

* :mod:`llm_envs.bridges.openenv`: OpenEnv, an ``Environment`` served by
  OpenEnv's own ``create_app`` (the episode server's ``/openenv`` route);
* :mod:`llm_envs.bridges.verifiers`: verifiers 0.4, a ``Taskset``/``Env``/
  ``Harness`` plugin (``load_environment``, ``vf-eval llm_envs_verifiers``);
* :mod:`llm_envs.bridges.trl`: TRL's ``environment_factory``, a seat as a
  tool, played in this process or on an episode server through OpenEnv's
  client.

Two bridges exchange token ids with their trainer, so they live beside the
trainer that owns tokens (``llm_envs`` never imports torch nor ``baselines``):
TRL's ``rollout_func`` (:mod:`baselines.grpo.rollout_func`) and verl's agent
loop (:mod:`baselines.verl`; its seats meet through
:mod:`llm_envs.serve.rendezvous`). These five are every bridge there is.

Each module needs its ecosystem's library (``openenv-core``, ``verifiers``)
only when its bridge is built or, for verifiers, imported; importing
:mod:`llm_envs` or this package imports none of them.
"""
