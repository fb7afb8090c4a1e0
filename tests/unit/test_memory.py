"""Freed heap memory goes back to the operating system when much is
held, and threads share few heaps."""

import os
import subprocess
import sys

import pytest

from scheduler import memory

pytestmark = pytest.mark.skipif(memory.free_held() is None,
                                reason='not glibc: trim does nothing')


def _burst() -> None:
    """Allocate 200 MB in blocks glibc serves from its heap, keeping a
    small object now and then (as the views made while a fleet loads),
    then free the blocks: the heap cannot shrink from its top."""
    blocks, kept = [], []
    for i in range(50000):
        blocks.append(bytes(4000))
        if i % 16 == 15:
            kept.append(bytearray(600))
    del blocks
    return kept


def test_a_burst_freed_is_given_back():
    kept = _burst()
    assert memory.free_held() > 150 << 20
    done = memory.trim(free_held_max=64 << 20, min_interval=0)
    assert done is not None
    assert done.held > 150 << 20
    assert done.released > 100 << 20
    assert len(kept) == 50000 // 16
    # What was given back is still counted free: no trim again so soon.
    assert memory.free_held() > 150 << 20
    assert memory.trim(free_held_max=64 << 20, min_interval=60) is None


def test_little_held_free_is_left_alone():
    memory.trim(free_held_max=0, min_interval=0)
    assert memory.trim(free_held_max=1 << 40, min_interval=0) is None


def test_resident_memory_is_read_from_the_process():
    assert memory.resident() > 10 << 20


_ARENAS_SCRIPT = '''
import ctypes, sys, threading
from scheduler import memory
print(memory.limit_arenas() if sys.argv[1] == 'limit' else None)
barrier, kept = threading.Barrier(6), []
def allocate():
    barrier.wait()
    kept.append(bytes(200000))   # from malloc, in this thread's heap
threads = [threading.Thread(target=allocate) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL(None).malloc_stats()
'''


def _arenas(*args, env=None):
    """How many heaps glibc made for six threads that allocate at once."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != 'MALLOC_ARENA_MAX'}
    done = subprocess.run([sys.executable, '-c', _ARENAS_SCRIPT, *args],
                          capture_output=True, text=True, timeout=60,
                          env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), done.stderr.count('Arena ')


def test_threads_share_two_heaps():
    assert _arenas('limit') == ('True', memory.ARENAS)
    assert _arenas('none')[1] > memory.ARENAS
    # The operator's MALLOC_ARENA_MAX wins.
    env = dict(os.environ, MALLOC_ARENA_MAX='4')
    assert _arenas('limit', env=env) == ('False', 4)
