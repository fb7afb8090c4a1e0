"""Freed heap memory goes back to the operating system when much is held."""

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
