"""What every local trainer shares, in torch: the forward pass, the losses, checkpoints.

* :mod:`baselines.training.forward`: training logprobs of Datums, packed or
  padded, in microbatches.
* :mod:`baselines.training.losses`: the policy-gradient losses and their metrics.
* :mod:`baselines.training.checkpoints`: save, find and restore a run's state.

Each module imports torch; import them, not this package, for what you need.
"""
