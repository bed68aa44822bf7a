"""Awaiting an `async def` activity from the engine's synchronous attempt.

Activity code written for asyncio (the openai client's async API, Pydantic AI, LangGraph)
returns a coroutine; the attempt must await it before it can record the result. It runs on
a private event loop, so it never touches the caller's. In a notebook the kernel's own loop
is already running in this thread, and a second loop cannot run there, so the coroutine
then runs on a private loop in a helper thread while the attempt waits for it.
"""

from __future__ import annotations

import contextvars
import inspect
import threading
from typing import Any, Awaitable

# What plain activities return. None of these is awaitable, and asking inspect.isawaitable
# about one costs an isinstance check against collections.abc.Awaitable (about 0.3 µs) on
# every fresh step of every run.
_PLAIN = frozenset({dict, list, str, int, float, bool, type(None), tuple})


def awaitable(value: Any) -> bool:
    """`inspect.isawaitable(value)`: is this an activity's coroutine (or other awaitable)
    to await before its result can be recorded? Answered at once for plain values."""
    return type(value) not in _PLAIN and inspect.isawaitable(value)


def run(awaitable: Awaitable) -> Any:
    """The value of `awaitable`, awaited to the end on a private event loop (its exception,
    raised here, if it fails)."""
    import asyncio   # here: most engines never meet an async activity
    try:
        asyncio.get_running_loop()
    except RuntimeError:   # no loop in this thread: the common case
        return _on_private_loop(awaitable)
    result: dict[str, Any] = {}
    context = contextvars.copy_context()   # dl.heartbeat() must find the attempt there too

    def worker():
        try:
            result["value"] = context.run(_on_private_loop, awaitable)
        except BaseException as exc:   # handed back to the attempt, which classifies it
            result["error"] = exc

    thread = threading.Thread(target=worker, name="durablelab-async-activity")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def _on_private_loop(awaitable: Awaitable) -> Any:
    import asyncio
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(awaitable)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
