"""The import layers: wire objects and resource arithmetic import
nothing above them.

``scheduler.resources`` (resource arithmetic) is the bottom layer,
``scheduler.objects`` (the wire objects) sits on it; the request layer
(filters, weighers, request limits, columns, drivers, the host
manager) sits on both.  ``scheduler.trust`` (who sent a message and
what that sender may do) is asked by the RPC edge before any request
is served, so it sits below the request layer too.  An import back
up the layers makes a cycle that only import order keeps working.
Imports are read from the source (``ast``), lazy ones inside
functions included.
"""

import ast
import pathlib

import pytest

import scheduler

ROOT = pathlib.Path(scheduler.__file__).parent

#: Layer -> the scheduler modules (prefixes) its modules may import.
ALLOWED = {
    'resources': ('scheduler.resources', 'scheduler.exception'),
    'objects': ('scheduler.objects', 'scheduler.resources',
                'scheduler.exception'),
    'trust': ('scheduler.resources', 'scheduler.exception',
              'scheduler.context'),
}


def _modules(layer: str) -> list:
    """The files of ``layer``: a package's modules, or one module."""
    package = ROOT / layer
    if package.is_dir():
        return sorted(package.rglob('*.py'))
    return [ROOT / (layer + '.py')]


def _scheduler_imports(path: pathlib.Path) -> set:
    tree = ast.parse(path.read_text(), str(path))
    package = 'scheduler.' + '.'.join(path.relative_to(ROOT).parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit('.', node.level - 1)[0] \
                    if node.level > 1 else package
                module = base + ('.' + node.module if node.module else '')
            else:
                module = node.module or ''
            # ``from scheduler import x`` imports module scheduler.x.
            found.update(module + '.' + alias.name for alias in node.names)
    return {name for name in found
            if name == 'scheduler' or name.startswith('scheduler.')}


def _allowed(name: str, prefixes: tuple) -> bool:
    return any(name == p or name.startswith(p + '.') for p in prefixes)


@pytest.mark.parametrize('layer', sorted(ALLOWED))
def test_layer_imports_nothing_above_it(layer):
    bad = []
    for path in _modules(layer):
        for name in sorted(_scheduler_imports(path)):
            if not _allowed(name, ALLOWED[layer]):
                bad.append('%s imports %s' % (path.relative_to(ROOT), name))
    assert not bad, bad


def test_the_check_sees_an_upward_import(tmp_path):
    # The parser must see both import forms, or the test above proves
    # nothing.
    module = ROOT / 'objects' / 'host_state.py'
    names = _scheduler_imports(module)
    assert 'scheduler.objects.base' in names
    assert not _allowed('scheduler.request_limits', ALLOWED['objects'])
    assert not _allowed('scheduler.filters.base', ALLOWED['resources'])
    assert not _allowed('scheduler.filters.base', ALLOWED['trust'])
    assert _modules('trust') == [ROOT / 'trust.py']
