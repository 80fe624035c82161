"""``python -m baselines.grpo``: the trainer's command line."""

from baselines.grpo.run import main

main()
