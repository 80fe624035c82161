"""Run ``baselines.is_trainer`` under ``accelerate launch`` with FSDP on CPU processes (gloo).

accelerate turns FSDP on for GPU-like devices only: on CPU processes it
leaves ``distributed_type`` at ``MULTI_CPU`` although the launcher asked for
FSDP (``ACCELERATE_USE_FSDP``) and built the plugin. This launcher script
switches the state to FSDP when the plugin is there, so the tests run the
trainer's sharded code path (FSDP2's ``fully_shard`` works over gloo) without
a GPU. Nothing else changes: the model is prepared, saved and gathered by
accelerate and torch as on GPUs.
"""

from __future__ import annotations

import sys


def _fsdp_on_cpu() -> None:
    from accelerate import state
    from accelerate.utils import DistributedType

    original = state.AcceleratorState.__init__

    def init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        plugin = kwargs.get("fsdp_plugin") or getattr(self, "fsdp_plugin", None)
        if self.distributed_type == DistributedType.MULTI_CPU and plugin is not None:
            self.distributed_type = DistributedType.FSDP
            self.fsdp_plugin = plugin

    state.AcceleratorState.__init__ = init


if __name__ == "__main__":
    _fsdp_on_cpu()
    from baselines.is_trainer.trainer import main

    main(sys.argv[1:])
