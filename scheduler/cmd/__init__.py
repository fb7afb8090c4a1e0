"""Console-script entry points.

Importing this package starts the concurrency runtime the configuration
asks for (eventlet, monkey-patched, by default; or native threads)
before anything else of the process runs: see ``scheduler.concurrency``.
"""

from scheduler import concurrency

concurrency.setup()
