"""The scheduling pipeline as public functions: candidates, filters, weights.

What the filter scheduler does for each instance, callable on its own
by tools, tests, replays and out-of-tree drivers, with no HostManager,
database or bus:

1. ``host_views(reports, aggregates)``: HostState objects (as computes
   send them) and aggregates turned into the views filters read;
2. ``candidates(spec_obj, hosts)``: ``ignore_hosts``,
   ``requested_destination`` (host, node, aggregates, cell) applied;
3. ``filter_candidates(spec_obj, hosts, filters)``: the forced hosts
   (``force_hosts``/``force_nodes``, filters skipped but on a rebuild)
   or the hosts that pass every filter, with a ``FilterReport``;
4. ``weigh(spec_obj, hosts, weighers)``: the ranking, best first, with
   each weigher's raw value, normalised value, multiplier and
   contribution per host (``WeighedHost.details``).

``filter_hosts`` runs 2 and 3 together.  Names are matched as nova
matches them: ``ignore_hosts`` and ``force_hosts`` ignore case,
``force_nodes`` does not.  Nothing here claims resources: the
scheduler claims on the host it picks from ``weigh``'s ranking.
"""

import dataclasses
import typing

from oslo_log import log as logging

from scheduler.filters import base as filters_base
from scheduler import host_view
from scheduler.resources import compute
from scheduler.weights import base as weights_base

LOG = logging.getLogger(__name__)


def host_views(reports: typing.Iterable, aggregates: typing.Iterable = (),
               received_at: float | None = None) -> list:
    """``HostView``s of compute ``reports`` (``objects.HostState``), each
    with the ``aggregates`` (``objects.Aggregate``) naming its host.

    ``received_at`` (seconds since the epoch) dates every report; None
    means now by ``scheduler.resources.liveness``' clock.
    """
    by_host: dict = {}
    for agg in aggregates:
        for name in agg.hosts:
            by_host.setdefault(name, []).append(agg)
    views = []
    for report in reports:
        view = host_view.HostView(report, received_at)
        view.set_aggregates(by_host.get(view.host, []))
        views.append(view)
    return views


def name_matcher(names: typing.Iterable | None, ignore_case: bool = True):
    """A test of a host or node name against ``names``; None when
    ``names`` is empty (nothing to match).

    nova lowers host names before comparing them and compares node
    names as they are (hypervisor node names are case-sensitive):
    ``ignore_case=False`` for nodes.
    """
    if not ignore_case:
        exact = {str(n) for n in names or ()}
        if not exact:
            return None
        return lambda name: name is not None and name in exact
    wanted = {str(n).lower() for n in names or ()}
    if not wanted:
        return None
    return lambda name: name is not None and name.lower() in wanted


def candidates(spec_obj, hosts: typing.Iterable) -> list:
    """``hosts`` narrowed before any filter runs.

    Drops ``ignore_hosts`` (any case); keeps only the
    ``requested_destination`` host (any case) and node, hosts in one
    aggregate of each of its ``aggregates`` entries (comma lists of
    uuids or names), and, unless it allows cross-cell moves, hosts of
    its ``cell``.
    """
    hosts = list(hosts)
    ignored = name_matcher(spec_obj.obj_get('ignore_hosts'))
    if ignored is not None:
        hosts = [h for h in hosts if not ignored(h.host)]
    dest = spec_obj.obj_get('requested_destination')
    if dest is None:
        return hosts
    if dest.obj_get('host'):
        wanted = name_matcher([dest.host])
        hosts = [h for h in hosts if wanted(h.host)]
    if dest.obj_get('node'):
        hosts = [h for h in hosts if h.nodename == dest.node]
    for entry in dest.obj_get('aggregates') or []:
        wanted = set(entry.split(','))
        hosts = [h for h in hosts
                 if any(a.uuid in wanted or a.name in wanted
                        for a in h.aggregates)]
    cell = dest.obj_get('cell')
    if cell and not dest.obj_get('allow_cross_cell_move'):
        hosts = [h for h in hosts if h.cell_uuid == cell]
    return hosts


def skips_filters(spec_obj) -> bool:
    """Whether the request forces hosts or nodes past the filters.

    As in nova, forcing skips the filters unless the request carries
    nova's internal check type (``_nova_check_type``, set on a rebuild
    with a new image): then the forced hosts still go through the
    filters, of which a rebuild runs only those with ``run_on_rebuild``.
    """
    if not (spec_obj.obj_get('force_hosts')
            or spec_obj.obj_get('force_nodes')):
        return False
    hints = spec_obj.obj_get('scheduler_hints') or {}
    return not hints.get(compute.REBUILD_HINT)


def forced_hosts(spec_obj, hosts: typing.Iterable) -> list | None:
    """The hosts an admin forced, or None when nothing is forced.

    ``force_hosts`` match host names in any case, ``force_nodes`` node
    names exactly, as in nova.  Forced hosts skip the filters (an
    operator who names a host takes responsibility for it; a rebuild
    is the exception, ``skips_filters``) but not the liveness check: a
    forced host that is down, forced down or disabled cannot build
    anything.
    """
    force_hosts = spec_obj.obj_get('force_hosts') or []
    force_nodes = spec_obj.obj_get('force_nodes') or []
    if not (force_hosts or force_nodes):
        return None
    host_ok = name_matcher(force_hosts)
    node_ok = name_matcher(force_nodes, ignore_case=False)
    matched = [h for h in hosts
               if (host_ok is None or host_ok(h.host))
               and (node_ok is None or node_ok(h.nodename))
               and h.is_up() and not h.disabled]
    LOG.info('Forced host(s) %(hosts)s node(s) %(nodes)s matched '
             '%(count)d host(s); filters %(filters)s',
             {'hosts': sorted(force_hosts), 'nodes': sorted(force_nodes),
              'count': len(matched),
              'filters': 'skipped' if skips_filters(spec_obj)
              else 'run (rebuild check)'})
    return matched


@dataclasses.dataclass
class FilterResult:
    """What the filter stage did for one instance."""

    #: Hosts that may take the instance, in their original order.
    passed: list
    #: True when they are forced hosts and the filters did not run.
    forced: bool
    #: How many hosts each filter removed (and why, if detailed).
    report: filters_base.FilterReport
    #: How many candidates the filters started from.
    candidates: int = 0


def filter_candidates(spec_obj, hosts: list, filters: list, index: int = 0,
                      report: filters_base.FilterReport | None = None
                      ) -> FilterResult:
    """Forced hosts, or the ``hosts`` (the forced ones, on a rebuild)
    that pass every filter, for the ``index``-th instance of the
    request (filters marked ``run_filter_once_per_request`` run only
    for the first)."""
    report = report if report is not None else filters_base.FilterReport()
    forced = forced_hosts(spec_obj, hosts)
    if forced is not None and skips_filters(spec_obj):
        return FilterResult(forced, True, report, len(hosts))
    passed = filters_base.HostFilterHandler().get_filtered_objects(
        filters, hosts if forced is None else forced, spec_obj, index,
        report)
    return FilterResult(passed, False, report, len(hosts))


def filter_hosts(spec_obj, hosts: typing.Iterable, filters: list,
                 index: int = 0, detailed: bool = False) -> FilterResult:
    """The whole filter stage: ``candidates`` then ``filter_candidates``.

    ``detailed`` keeps, per filter, the reason each host was rejected.
    """
    narrowed = candidates(spec_obj, hosts)
    return filter_candidates(spec_obj, narrowed, filters, index,
                             filters_base.FilterReport(detailed=detailed))


def weigh(spec_obj, hosts: typing.Iterable, weighers: list,
          explain: bool = True) -> list:
    """``hosts`` as ``WeighedHost``s, best first.

    With ``explain`` (the default here), each has ``details``: weigher
    name -> ``WeigherScore`` (``raw``, ``normalized``, ``multiplier``,
    ``contribution``); ``weight`` is the sum of the contributions.
    """
    return weights_base.HostWeightHandler().get_weighed_objects(
        weighers, hosts, spec_obj, explain=explain)


def ranking(weighed: list) -> list:
    """``weigh``'s answer as plain dicts, for JSON and tables."""
    return [{'host': w.obj.host, 'nodename': w.obj.nodename,
             'weight': w.weight,
             'weighers': {name: {'raw': s.raw, 'normalized': s.normalized,
                                 'multiplier': s.multiplier,
                                 'contribution': s.contribution}
                          for name, s in w.details.items()}}
            for w in weighed]
