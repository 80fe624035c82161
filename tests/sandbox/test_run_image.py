"""What every run is forked with: nothing the runs do not need is mapped into them.

A fork copies the spawner's page tables and an exit tears them down: every
mapping the worker leaves in its memory costs every run (see the breakdown of
bench/sandbox.py).
"""

from __future__ import annotations

import os

import pytest

from llm_envs.sandbox import Sandbox, _startup

MAPPED_NSS = "import sys\nprint([line for line in open('/proc/self/maps') if 'libnss' in line])\n"


def test_runs_carry_no_name_service_module(sandbox: Sandbox) -> None:
    # The worker looks up its runs' uid in a probe process: the C library's
    # name-service modules it loads stay there.
    report = sandbox.run_tests(MAPPED_NSS, [])
    assert report.stdout.strip() == "[]", report


@pytest.mark.skipif(os.geteuid() != 0, reason="the runs switch uid only as root")
def test_a_uid_with_an_account_is_never_borrowed(monkeypatch: pytest.MonkeyPatch) -> None:
    # (No import paths to probe: only the account rule is tested.)
    monkeypatch.setattr(_startup, "_SANDBOX_UID_BASE", 0)  # uid 0 + index 0: root's account
    assert _startup.pick_uid(0, []) == 65534  # nobody, the fallback
    monkeypatch.setattr(_startup, "_SANDBOX_UID_BASE", 2_100_000_000)
    assert _startup.pick_uid(7, []) == 2_100_000_007
