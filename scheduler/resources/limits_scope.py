"""The store of limits filters set for one request (its scope).

The lowest layer of ``scheduler.request_limits``: the wire object
(``objects.HostState.limits``) and the host views read the current
request's store through ``for_host``, so this module imports nothing of
the scheduler; the filters' side (which filters set limits, collecting
them) stays in ``scheduler.request_limits``.
"""

import contextlib
import contextvars
from typing import Iterator

_CURRENT: contextvars.ContextVar = contextvars.ContextVar(
    'scheduler_request_limits', default=None)


@contextlib.contextmanager
def scope() -> Iterator[dict]:
    """The limits store of one request (nested scopes are independent)."""
    store: dict = {}
    token = _CURRENT.set(store)
    try:
        yield store
    finally:
        _CURRENT.reset(token)


def for_host(key: tuple) -> dict:
    """The current request's limits for host ``key`` (writable)."""
    store = _CURRENT.get()
    if store is None:
        return {}
    return store.setdefault(key, {})
