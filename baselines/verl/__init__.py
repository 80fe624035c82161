"""Train in llm-envs with verl (``verl==0.9.1``): one agent loop per seat, seats meeting by key.

* :mod:`baselines.verl.dataset`: the training data set, one row per (problem,
  episode, seat) in verl's ``RLHFDataset`` parquet format, and the agent-loop
  config file that names the loop (``python -m baselines.verl.dataset``).
  Needs no verl.
* :mod:`baselines.verl.agent_loop`: :class:`~baselines.verl.agent_loop.SeatAgentLoop`,
  a verl ``AgentLoopBase`` that plays its row's seat and meets the episode's
  other seats through a rendezvous (:mod:`llm_envs.serve.rendezvous`): in its
  own process, or on an episode server that every worker reaches. It imports
  verl; nothing else here imports it, so ``import baselines.verl`` works
  without verl.

``docs/verl.md`` has the recipe: the config and the command for one node and
for several.
"""
