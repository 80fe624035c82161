"""What the server refuses, as exceptions that carry their HTTP status.

The hub raises them, the web layer turns them into HTTP errors (and WebSocket
error messages) with the same status and message. Every message names the
bad value and the fix. An agent's *output* is never one of them: any text is
an action, and the environment scores it.
"""

from __future__ import annotations

__all__ = ["Conflict", "Failed", "Forbidden", "Invalid", "NotFound", "ServeError", "Unavailable"]


class ServeError(Exception):
    """A refused request: ``status`` is its HTTP status, ``str(error)`` its message."""

    status: int = 500


class NotFound(ServeError):
    """An unknown env, episode or seat (404)."""

    status = 404


class Forbidden(ServeError):
    """A seat's request without the seat's token (403)."""

    status = 403


class Conflict(ServeError):
    """A request the episode's state refuses: out of turn, a seat joined twice, over (409)."""

    status = 409


class Invalid(ServeError):
    """Settings the environment refuses: a task it does not take, bad env_kwargs (422)."""

    status = 422


class Unavailable(ServeError):
    """The server is full: as many episodes run as it was started to hold (503)."""

    status = 503


class Failed(ServeError):
    """The environment raised while stepping: the episode is over, recorded as failed (500)."""

    status = 500
