"""ACME's scheduler plugins, installed as their own package.

The entry points in ``pyproject.toml`` are what make the scheduler find
``AcmeFilter`` and ``AcmeWeigher``; importing them here also lets an
operator name ``acme_filters.AcmeFilter`` as a dotted path.
"""

from acme_filters.acme import AcmeFilter
from acme_filters.weigher import AcmeWeigher

__all__ = ['AcmeFilter', 'AcmeWeigher']
