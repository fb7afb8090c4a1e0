"""Giving memory that a burst of work freed back to the operating system.

After a burst (a whole fleet's reports, an explain over every host)
glibc's allocator keeps most of what was freed: it hands memory back
only from the top of its heap, and the long-lived objects made during
the burst sit above the freed ones.  ``malloc_trim`` gives the free
pages back wherever they are, and is only worth its cost (it walks the
heap) when much is free, which ``mallinfo2`` says cheaply.  Elsewhere
than on glibc this does nothing.
"""

import ctypes
import ctypes.util
import functools
import mmap
import os
import time
import typing

#: Free bytes the allocator may hold before ``trim`` gives them back.
FREE_HELD_MAX = 64 << 20

#: Seconds between two trims at least: pages given back stay free
#: chunks in the allocator's books (what it says is held free does not
#: fall), so a trim every periodic round would mostly find nothing.
MIN_INTERVAL = 60.0

_last_trim = [float('-inf')]


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (2.33 and later)."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        'arena', 'ordblks', 'smblks', 'hblks', 'hblkhd', 'usmblks',
        'fsmblks', 'uordblks', 'fordblks', 'keepcost')]


@functools.cache
def _glibc():
    """glibc's ``mallinfo2`` and ``malloc_trim``, or None elsewhere."""
    libc = _libc()
    try:
        mallinfo2, malloc_trim = libc.mallinfo2, libc.malloc_trim
    except AttributeError:
        return None
    mallinfo2.restype = _MallInfo2
    mallinfo2.argtypes = []
    malloc_trim.restype = ctypes.c_int
    malloc_trim.argtypes = [ctypes.c_size_t]
    return mallinfo2, malloc_trim


#: Heaps (arenas) glibc's allocator may keep, unless the environment
#: sets ``MALLOC_ARENA_MAX``: its default is eight a core.
ARENAS = 2

_M_ARENA_MAX = -8


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Let glibc's allocator keep at most ``arenas`` heaps (False:
    nothing done: not glibc, or ``MALLOC_ARENA_MAX`` in the environment,
    which wins).  Call it before threads start.

    glibc gives a thread that finds the heaps busy a heap of its own and
    keeps what is freed in each apart: threads that take turns (the GIL)
    gain nothing from that, and memory grew with the number of callers.
    """
    if 'MALLOC_ARENA_MAX' in os.environ:
        return False
    libc = _libc()
    mallopt = getattr(libc, 'mallopt', None) if libc is not None else None
    if mallopt is None:
        return False
    mallopt.restype = ctypes.c_int
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_ARENA_MAX, arenas))


@functools.cache
def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library('c'))
    except (OSError, TypeError):
        return None


def free_held() -> int | None:
    """Bytes the allocator holds free in its heaps (None: not glibc)."""
    calls = _glibc()
    return None if calls is None else calls[0]().fordblks


class Trimmed(typing.NamedTuple):
    """What one ``trim`` did."""

    #: By how many bytes the resident memory fell.
    released: int
    #: Bytes the allocator held free before.
    held: int
    seconds: float


def trim(free_held_max: int = FREE_HELD_MAX,
         min_interval: float = MIN_INTERVAL) -> Trimmed | None:
    """Give free heap memory back if more than ``free_held_max`` bytes
    of it are held and the last trim was ``min_interval`` seconds ago or
    more (None: nothing done).  Logs nothing, so that it may run in a
    native thread of a monkey-patched process."""
    calls = _glibc()
    if calls is None or time.monotonic() - _last_trim[0] < min_interval:
        return None
    mallinfo2, malloc_trim = calls
    held = mallinfo2().fordblks
    if held <= free_held_max:
        return None
    # fordblks does not change: what was given back shows in the
    # resident memory only.
    before, started = resident(), time.monotonic()
    malloc_trim(0)
    _last_trim[0] = time.monotonic()
    return Trimmed(max(0, before - resident()), held,
                   time.monotonic() - started)


def resident() -> int:
    """This process's resident memory in bytes (0 if unknown)."""
    try:
        with open('/proc/self/statm') as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * _PAGE_SIZE


_PAGE_SIZE = mmap.PAGESIZE
