"""Running episodes end as ``interrupted`` when the server stops, and their clients hear of it.

On SIGTERM or SIGINT uvicorn closes every connection (a WebSocket with code
1012) *before* the app's lifespan ends, so a hub that interrupted its
episodes only at the end of the lifespan could record them but tell nobody.
:func:`interrupting_on_exit` takes the signal first: it runs ``interrupt`` on
the event loop (records written, every seat's ``end`` published, long polls
answered), then hands the signal on to the handler it replaced (uvicorn's),
which stops the server. A second signal is handed on at once.

Signals reach the main thread only: a server run in another thread
(:func:`llm_envs.serve.app.serving`) records its interrupted episodes when
its lifespan ends, with no one left to tell.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import Any

__all__ = ["interrupting_on_exit"]

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)
FLUSH_SECONDS = 0.2
"""How long the seats' sockets get to send their last message before the server closes them."""


@contextlib.contextmanager
def interrupting_on_exit(interrupt: Callable[[str], Awaitable[None]]) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGINT first await ``interrupt(reason)``.

    Call it on the event loop's thread (an app's lifespan). Where the current
    handlers are not Python callables (the process's defaults, not uvicorn's)
    or this is not the main thread, it changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    previous: dict[int, Any] = {int(sig): signal.getsignal(sig) for sig in SIGNALS}
    taken = [sig for sig, handler in previous.items() if callable(handler)]
    stopping: list[asyncio.Task[None] | None] = []

    async def stop(sig: int, frame: FrameType | None) -> None:
        try:
            await interrupt(f"the server received {signal.Signals(sig).name} and stops")
            await asyncio.sleep(FLUSH_SECONDS)
        except Exception:
            log.exception("interrupting the running episodes failed")
        finally:
            _hand_on(previous[sig], sig, frame)

    def start(sig: int, frame: FrameType | None) -> None:
        stopping.append(loop.create_task(stop(sig, frame)))

    def handle(sig: int, frame: FrameType | None) -> None:
        if stopping:  # a second signal: stop now
            _hand_on(previous[sig], sig, frame)
            return
        stopping.append(None)
        # Thread-safe form, as asyncio's own signal handling: it wakes a loop asleep in select.
        loop.call_soon_threadsafe(start, sig, frame)

    for sig in taken:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig in taken:
            if signal.getsignal(sig) is handle:
                signal.signal(sig, previous[sig])


def _hand_on(handler: Any, sig: int, frame: FrameType | None) -> None:
    if callable(handler):
        handler(sig, frame)
