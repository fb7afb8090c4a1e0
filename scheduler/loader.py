"""The one loader for plugins: drivers, filters and weighers.

Every in-tree plugin is an entry point in ``setup.cfg``; out-of-tree
plugins are entry points of their own package or plain dotted class
paths in the configuration, as in the seeds
(``available_filters = mypkg.filters.TroveImageFilter``).
"""

from importlib import metadata

from oslo_log import log as logging
from oslo_utils import importutils
import stevedore

from scheduler import exception

LOG = logging.getLogger(__name__)

DRIVER_NAMESPACE = 'scheduler.drivers'
FILTER_NAMESPACE = 'scheduler.filters'
WEIGHER_NAMESPACE = 'scheduler.weighers'

#: Top-level packages of the plugins loaded from outside the scheduler
#: package (``outside_package``).
_OUTSIDE: set = set()


def _loaded(cls: type) -> type:
    top = cls.__module__.split('.', 1)[0]
    if top != __name__.split('.', 1)[0]:
        _OUTSIDE.add(top)
    return cls


def outside_package(module: str | None) -> str | None:
    """The top-level package of ``module`` (a module's ``__name__``) when
    a plugin loaded from outside the scheduler package comes from it,
    else None: what ``rpc.Dispatcher`` blames for an error raised in
    that package's code."""
    top = (module or '').split('.', 1)[0]
    return top if top in _OUTSIDE else None


def load_class(namespace: str, name: str) -> type:
    """Load a class by entry point ``name`` in ``namespace`` or dotted path.

    Raises ``PluginLoadError`` saying what was tried.
    """
    errors = []
    if '.' in name:
        # A class path (entry point names have no dots); importing it
        # first spares a misleading "could not load" from stevedore.
        try:
            return _loaded(importutils.import_class(name))
        except (ImportError, ValueError, AttributeError) as e:
            errors.append('not importable: %s' % e)
    if not metadata.entry_points(group=namespace, name=name):
        # Asked for a name nobody registered, stevedore warns "Could not
        # load": a second line about the mistake the caller reports.
        errors.append('no entry point (NoMatches)')
    else:
        try:
            return _loaded(stevedore.driver.DriverManager(
                namespace, name, invoke_on_load=False).driver)
        except Exception as e:  # stevedore raises several types
            errors.append('no entry point (%s)' % e.__class__.__name__)
    raise exception.PluginLoadError(kind=namespace, name=name,
                                    reason='; '.join(errors))


def all_classes(namespace: str) -> list:
    """Every class registered in ``namespace``, by any installed package.

    A plugin that fails to import is logged and left out: one broken
    third-party package must not hide the in-tree plugins.
    """
    classes = []

    def _failed(manager, entrypoint, error):
        LOG.error('Could not load %s plugin %s: %s', namespace,
                  entrypoint.name, error)

    manager = stevedore.ExtensionManager(
        namespace, invoke_on_load=False,
        on_load_failure_callback=_failed)
    for ext in sorted(manager, key=lambda e: e.name):
        if ext.plugin not in classes:
            classes.append(_loaded(ext.plugin))
    return classes


def load_classes(namespace: str, names: list, all_marker: str) -> list:
    """Resolve a list of ``all_marker``, dotted paths and entry points.

    ``all_marker`` (e.g. ``scheduler.filters.all_filters``) stands for
    every plugin of the namespace.  Order is kept; duplicates dropped.
    """
    classes: list = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        found = (all_classes(namespace) if name == all_marker
                 else [load_class(namespace, name)])
        for cls in found:
            if cls not in classes:
                classes.append(cls)
    return classes
