"""Tests of the filter catalogue, and the fakes they share with the
weigher tests: real HostViews and RequestSpecs, built tersely."""

import itertools

from scheduler.host_view import HostView
from scheduler import objects

_ids = itertools.count(1)


def aggregate(name: str = None, hosts: tuple = (), **metadata):
    """An Aggregate with ``metadata`` (values turned into strings)."""
    agg_id = next(_ids)
    return objects.Aggregate(
        id=agg_id, uuid=None, name=name or 'agg%d' % agg_id,
        hosts=list(hosts),
        metadata={k: str(v) for k, v in metadata.items()})


def host(name: str = 'host1', nodename: str | None = None,
         aggregates: tuple = (), **fields) -> HostView:
    """A HostView like the filters get, of a report with ``fields``."""
    values = {'host': name, 'nodename': nodename or name,
              'memory_mb': 8192, 'local_gb': 100, 'vcpus': 8}
    values.update(fields)
    view = HostView(objects.HostState(**values).set_defaults())
    view.set_aggregates(list(aggregates))
    return view


def flavor(**fields):
    values = {'name': 'm1.small', 'memory_mb': 1024, 'vcpus': 1,
              'root_gb': 10, 'ephemeral_gb': 0, 'swap': 0,
              'extra_specs': {}}
    values.update(fields)
    return objects.Flavor(**values)


def request(flavor_fields: dict | None = None, image_properties=None,
            image_id: str | None = None, hints: dict | None = None,
            **fields):
    """A RequestSpec; ``hints`` values may be single strings."""
    spec = objects.RequestSpec(flavor=flavor(**(flavor_fields or {})),
                               **fields)
    if image_properties is not None or image_id is not None:
        spec.image = objects.ImageMeta(
            id=image_id, properties=dict(image_properties or {}))
    if hints is not None:
        spec.scheduler_hints = {
            k: list(v) if isinstance(v, (list, tuple)) else [v]
            for k, v in hints.items()}
    return spec


def passing(flt, hosts: list, spec) -> list:
    """Names of the ``hosts`` ``flt`` passes, checked both ways.

    ``filter_all`` (what the pipeline calls) and ``host_passes`` (what
    a single-host caller uses) must agree, and every rejected host must
    get a reason in words.
    """
    by_all = [h.host for h in flt.filter_all(list(hosts), spec)]
    by_one = [h.host for h in hosts if flt.host_passes(h, spec)]
    assert by_all == by_one
    for h in hosts:
        if h.host not in by_all:
            reason = flt.rejection_reason(h, spec)
            assert reason and reason != 'did not pass', (h.host, reason)
    return by_all
