"""Console-script entry points.

Importing this package greens the standard library for eventlet before
anything else of the process runs (see ``scheduler.concurrency``).
"""

from scheduler import concurrency

concurrency.monkey_patch()
