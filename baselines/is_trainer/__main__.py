"""``python -m baselines.is_trainer``: the trainer's command line."""

from baselines.is_trainer.trainer import main

main()
