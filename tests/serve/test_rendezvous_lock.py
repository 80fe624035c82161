"""A rendezvous holds no lock across keys: one key's slow family build delays no other key."""

from __future__ import annotations

import asyncio
import threading

from llm_envs.serve.families import EpisodeSpec, Families
from llm_envs.serve.hub import Hub
from llm_envs.serve.rendezvous import Rendezvous
from llm_envs.serve.store import EpisodeStore

SLOW = EpisodeSpec("debate", {"num_agents": 3, "max_rounds": 1}, "default", {}, 0, 0)
FAST = EpisodeSpec("debate", {"num_agents": 3, "max_rounds": 2}, "default", {}, 0, 0)


class HeldFamilies(Families):
    """Families whose build of ``SLOW`` waits until ``release`` is set (a data set loading)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.building = threading.Event()

    def family(self, spec):
        if spec == SLOW:
            self.building.set()
            assert self.release.wait(timeout=60), "the test never released the slow build"
        return super().family(spec)


async def meet_while_another_key_builds() -> tuple[list[str], list[str]]:
    families = HeldFamilies()
    hub = Hub(families, EpisodeStore(None), seat_timeout=60.0)
    rendezvous = Rendezvous(hub)
    loop = asyncio.get_running_loop()
    try:
        slow = asyncio.ensure_future(rendezvous.meet("slow-key", "agent_0", SLOW))
        await loop.run_in_executor(None, families.building.wait, 30)
        # While the slow key's family builds: another key's seats meet, and a later
        # seat of the slow key waits its turn behind the first.
        fast = await asyncio.wait_for(
            asyncio.gather(
                rendezvous.meet("fast-key", "agent_0", FAST),
                rendezvous.meet("fast-key", "agent_1", FAST),
            ),
            timeout=10,
        )
        second_slow = asyncio.ensure_future(rendezvous.meet("slow-key", "agent_1", SLOW))
        await asyncio.sleep(0.2)
        assert not slow.done() and not second_slow.done()
        families.release.set()
        slow_meetings = await asyncio.wait_for(asyncio.gather(slow, second_slow), timeout=30)
        return [m.episode for m in fast], [m.episode for m in slow_meetings]
    finally:
        families.release.set()
        await hub.close()


def test_a_slow_family_build_for_one_key_blocks_no_other_key():
    fast, slow = asyncio.run(meet_while_another_key_builds())
    assert fast[0] == fast[1]  # the fast key's two seats met in one episode
    assert slow[0] == slow[1] != fast[0]  # and so did the slow key's, in another
