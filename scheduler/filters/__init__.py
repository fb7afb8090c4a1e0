"""Host filters: the authoring API and the pipeline that runs them.

A filter decides which hosts can take an instance.  Write one by
subclassing ``BaseHostFilter`` and implementing ``host_passes`` (one host
at a time) or ``filter_all`` (the whole candidate list at once, for
filters that are cheaper that way), or subclass ``RequestScopedFilter``
to read the request once (``prepare``) and test each host (``passes``).
A test that refuses a host says why by returning a ``Rejected``.
Register it as an entry point in the ``scheduler.filters`` namespace,
or name its class path in ``[filter_scheduler] available_filters``,
then add its class name to ``enabled_filters``.
"""

from scheduler.filters.base import BaseHostFilter
from scheduler.filters.base import FilterReport
from scheduler.filters.base import HostFilterHandler
from scheduler.filters.base import Rejected
from scheduler.filters.base import RequestScopedFilter
from scheduler.filters.base import SKIP
from scheduler.filters.base import request_is_rebuild
from scheduler import loader

__all__ = ['BaseHostFilter', 'FilterReport', 'HostFilterHandler',
           'Rejected', 'RequestScopedFilter', 'SKIP', 'all_filters',
           'request_is_rebuild']


def all_filters() -> list:
    """Every filter class registered in the ``scheduler.filters`` namespace.

    This is what ``available_filters = scheduler.filters.all_filters``
    means: in-tree filters and those installed by other packages.
    """
    return loader.all_classes(loader.FILTER_NAMESPACE)
