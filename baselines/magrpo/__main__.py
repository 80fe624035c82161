"""``python -m baselines.magrpo``: the trainer's command line."""

from baselines.magrpo.trainer import main

main()
