"""The one place that chooses the concurrency backend.

The service, the simulator and the demo run on eventlet, as the oslo
libraries expect by default.  ``monkey_patch()`` must run before any
other module of the process imports socket, threading or time users:
``scheduler.cmd`` calls it first thing.  Moving to oslo.service's
threading backend later means changing this module and ``EXECUTOR``.
"""

import gc
import os
import warnings

EXECUTOR = 'eventlet'

# eventlet warns, when first imported (by us or by an oslo library), that
# it is deprecated.  The scheduler runs on it on purpose until oslo's
# threading backend replaces it here; the warning would be noise in every
# log.  Only that one warning is silenced: eventlet attributes it to the
# import machinery, so it cannot be told apart by module, but it has its
# own category and text.
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated',
                        category=Warning)

#: Set (to anything) to leave the process unpatched: tests that import
#: console-script modules use it.
NO_PATCH_ENV = 'SCHEDULER_NO_MONKEY_PATCH'

_patched = False


def monkey_patch() -> None:
    """Green the standard library for eventlet (idempotent)."""
    global _patched
    if _patched or os.environ.get(NO_PATCH_ENV):
        return
    import eventlet
    eventlet.monkey_patch()
    _patched = True


def tune_garbage_collector() -> None:
    """Collect garbage less often than Python's defaults.

    A scheduler keeps tens of thousands of long-lived objects (a report
    and a view per node) and allocates thousands of short-lived ones per
    request.  With the default thresholds the full collections this
    triggers walk every long-lived object: with 10,000 hosts that was
    pauses of up to 200 ms, the slowest 5% of requests.  Larger
    thresholds keep young garbage collected and make full collections
    rare (measured: median 115 -> 84 ms, worst 282 -> 156 ms per request
    at 10,000 hosts).
    """
    gc.set_threshold(50000, 50, 100)


def run_blocking(func, *args, **kwargs):
    """Run ``func`` in a native thread, so the event loop keeps serving.

    For long blocking work (database batches) in a monkey-patched
    process; without eventlet it is a plain call.
    """
    if not _patched:
        return func(*args, **kwargs)
    from eventlet import tpool
    return tpool.execute(func, *args, **kwargs)
