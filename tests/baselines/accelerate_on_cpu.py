"""Run a trainer under ``accelerate launch`` with FSDP or DeepSpeed on CPU processes (gloo).

    accelerate launch --config_file configs/accelerate/fsdp.yaml --num_processes 2 ...
        tests/baselines/accelerate_on_cpu.py (-m MODULE | SCRIPT) [ARGS...]

``accelerate`` turns FSDP and DeepSpeed on for accelerator devices only: on
CPU processes it leaves ``distributed_type`` at ``MULTI_CPU`` (plain data
parallel) although the launcher asked for FSDP or DeepSpeed and built the
plugin, so a CPU test of those configs would silently test DDP. This
launcher switches the state to the plugin's backend when it is there:

* FSDP: FSDP2's ``fully_shard`` works over gloo as it is;
* DeepSpeed: ``deepspeed.comm`` joins the gloo group ``torch.distributed``
  already started (DeepSpeed's CPU accelerator uses gloo when Intel's oneCCL
  bindings are missing).

Nothing else changes: models are prepared, saved and gathered by
``accelerate``, torch and DeepSpeed as on GPUs. Then the target runs as
``python -m MODULE ARGS`` or ``python SCRIPT ARGS`` would.
"""

from __future__ import annotations

import runpy
import sys
from typing import Any


def _backends_on_cpu() -> None:
    from accelerate import state
    from accelerate.utils import DistributedType

    original = state.AcceleratorState.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if self.distributed_type != DistributedType.MULTI_CPU:
            return
        fsdp = kwargs.get("fsdp_plugin") or getattr(self, "fsdp_plugin", None)
        deepspeed = kwargs.get("deepspeed_plugin")
        if fsdp is not None:
            self.distributed_type = DistributedType.FSDP
            self.fsdp_plugin = fsdp
        elif deepspeed is not None:
            from deepspeed import comm

            if not comm.is_initialized():
                comm.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
            # What accelerate does on GPUs: DeepSpeed owns mixed precision, and later
            # AcceleratorState() calls copy the distributed type from PartialState.
            self.distributed_type = DistributedType.DEEPSPEED
            state.PartialState._shared_state["distributed_type"] = DistributedType.DEEPSPEED
            self._mixed_precision = "no"
            deepspeed.set_mixed_precision("no")
            deepspeed.select(_from_accelerator_state=True)
            self.deepspeed_plugins = deepspeed

    state.AcceleratorState.__init__ = init


def main(argv: list[str]) -> None:
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        raise SystemExit("usage: accelerate_on_cpu.py (-m MODULE | SCRIPT) [ARGS...]")
    _backends_on_cpu()
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
