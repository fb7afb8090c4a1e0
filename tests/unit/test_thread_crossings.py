"""Only ``scheduler.concurrency`` crosses between OS threads and green
threads.

Under eventlet a native thread that waits on a green primitive, or
wakes a green thread from one, froze the service (``greenlet.error:
Cannot switch to a different thread``, then nothing more, not even
SIGTERM: issue 29).  ``concurrency.run_native`` is the one way onto a
native thread and ``concurrency.native_lock`` the one lock both kinds
share; everything else in ``scheduler/`` uses the runtime's own
``threading`` (green under eventlet, native under threading), whose
threads and locks always match each other.  This test keeps it so:
read from the source (``ast``, lazy imports inside functions included),
no other module may

* import eventlet or greenlet at all (``tpool``, ``patcher.original``,
  hubs): what the runtime is belongs to ``scheduler.concurrency``;
* import ``_thread``, a thread pool (``concurrent.futures``,
  ``futurist``, ``multiprocessing.pool`` / ``.dummy``), or hand work to
  an executor (``run_in_executor``, ``asyncio.to_thread``): their
  threads are native whatever the runtime, or their pools are joined at
  exit;
* bind names out of ``threading`` at import time (``from threading
  import Lock``): a module imported before the monkey patching keeps
  the native class for ever, green code then blocks the hub on it;
* reach for ``threading``'s private helpers (``threading._...``).
"""

import ast
import pathlib

import scheduler

ROOT = pathlib.Path(scheduler.__file__).parent

#: The module that owns every crossing.
OWNER = ROOT / 'concurrency.py'

#: Modules (and their submodules) no other module may import.
FORBIDDEN_MODULES = ('eventlet', 'greenlet', '_thread', 'concurrent.futures',
                     'futurist', 'multiprocessing.pool',
                     'multiprocessing.dummy')

#: Attribute names that hand work to a native thread.
FORBIDDEN_ATTRIBUTES = ('run_in_executor', 'to_thread')


def _forbidden_module(name: str) -> bool:
    return any(name == f or name.startswith(f + '.')
               for f in FORBIDDEN_MODULES)


def crossings(source: str) -> list:
    """What in ``source`` crosses between OS and green threads."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend('import %s' % alias.name for alias in node.names
                         if _forbidden_module(alias.name))
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ''
            names = [module + '.' + alias.name for alias in node.names]
            if _forbidden_module(module) or \
                    any(_forbidden_module(name) for name in names):
                found.append('from %s import %s' % (
                    module, ', '.join(a.name for a in node.names)))
            elif module == 'threading':
                found.append('from threading import %s (bound at import '
                             'time)' % ', '.join(a.name for a in node.names))
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES:
                found.append('.%s' % node.attr)
            elif node.attr.startswith('_') and \
                    isinstance(node.value, ast.Name) and \
                    node.value.id == 'threading':
                found.append('threading.%s' % node.attr)
    return found


def test_only_the_concurrency_module_crosses_threads():
    bad = []
    for path in sorted(ROOT.rglob('*.py')):
        if path == OWNER:
            continue
        for what in crossings(path.read_text()):
            bad.append('%s: %s (use scheduler.concurrency)'
                       % (path.relative_to(ROOT), what))
    assert not bad, '\n'.join(bad)


def test_the_owner_is_where_the_crossings_are():
    # If the owner itself stops matching, the scan reads the wrong
    # things and the test above proves nothing.
    found = crossings(OWNER.read_text())
    assert 'from eventlet import tpool' in found, found


def test_the_check_sees_each_kind_of_crossing():
    seen = crossings('''
import eventlet.tpool
from eventlet import patcher
import _thread
from concurrent import futures
import concurrent.futures
import futurist
from multiprocessing.pool import ThreadPool
from threading import Lock
import threading
threading._start_new_thread(f, ())
loop.run_in_executor(None, f)
asyncio.to_thread(f)

def lazily():
    import greenlet
''')
    # ast.walk is breadth first: compared as sets of lines.
    assert sorted(seen) == sorted([
        'import eventlet.tpool', 'from eventlet import patcher',
        'import _thread', 'from concurrent import futures',
        'import concurrent.futures', 'import futurist',
        'from multiprocessing.pool import ThreadPool',
        'from threading import Lock (bound at import time)',
        'threading._start_new_thread', '.run_in_executor', '.to_thread',
        'import greenlet']), seen
    # The runtime's own threads and locks are allowed.
    assert crossings('import threading\nthreading.Thread(target=f)\n'
                     'threading.Lock()\n') == []
