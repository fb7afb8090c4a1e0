"""The filter base class, the handler that walks the filters, and its report.
"""

import dataclasses
import typing

from oslo_log import log as logging

from scheduler.resources.compute import request_is_rebuild

LOG = logging.getLogger(__name__)


class Rejected:
    """A host's "no", with the reason ``explain`` shows.

    False in a boolean test, so a filter's per-host test returns either
    True or one of these, and the one test is both the decision and its
    explanation.  The reason is formatted only when asked for (explain),
    never on the filter path: ``reason % args`` then, or ``reason()``
    when it is a callable (for a reason that costs work to gather).
    """

    __slots__ = ('_reason', '_args')

    def __init__(self, reason: 'str | typing.Callable[[], str]', *args):
        self._reason = reason
        self._args = args

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        if callable(self._reason):
            return self._reason()
        return self._reason % self._args if self._args else self._reason

    def __repr__(self) -> str:
        return 'Rejected(%r)' % str(self)


#: What a per-host test returns: True, or a false value (False, or a
#: ``Rejected`` that says why).
Verdict = typing.Union[bool, Rejected]


def reason_of(verdict, flt) -> str:
    """The reason a ``verdict`` of ``flt`` gives; for a plain False (or
    a host that passes when asked again), the first line of the
    filter's docstring."""
    if isinstance(verdict, Rejected):
        return str(verdict)
    doc = (type(flt).__doc__ or '').strip().splitlines()
    return 'did not pass: %s' % doc[0] if doc else 'did not pass'


class BaseHostFilter:
    """Base class of host filters.

    Subclasses implement ``host_passes`` or override ``filter_all``.
    ``host_passes`` says why a host did not pass by returning a
    ``Rejected`` (``explain`` and NoValidHost show it); a plain False
    gets the first line of the class docstring.
    """

    #: Run only for the first instance of a multi-instance request (the
    #: answer cannot change between instances of one request).
    run_filter_once_per_request = False

    #: Run for a rebuild on the instance's own host (nova's
    #: ``RUN_ON_REBUILD``).  A rebuild keeps the instance's resources
    #: and host, so only filters that judge the new image need run;
    #: every other filter passes the host unexamined.
    run_on_rebuild = False

    def host_passes(self, host_state, spec_obj) -> Verdict:
        """True if ``host_state`` can take an instance of ``spec_obj``;
        else False or, better, a ``Rejected`` saying why."""
        raise NotImplementedError()

    def filter_all(self, host_states: typing.Iterable, spec_obj) -> list:
        """Return the hosts that pass; by default ``host_passes`` on each."""
        return [host for host in host_states
                if self.host_passes(host, spec_obj)]

    def run_filter_for_index(self, index: int) -> bool:
        """Whether to run for the ``index``-th instance of the request."""
        return not (self.run_filter_once_per_request and index > 0)

    def host_limits(self, host_state, spec_obj) -> dict:
        """Limits the compute must enforce if an instance lands here.

        Asked only for the hosts a request returns (destination and
        alternates), after filtering; the claim checks them too.  A
        filter may instead write ``host_state.limits[...]`` while it
        filters, as nova's do: that dict belongs to the request (see
        ``scheduler.request_limits``).
        """
        return {}

    def rejection_reason(self, host_state, spec_obj) -> str:
        """Why ``host_state`` did not pass; only called for rejected
        hosts.  Derived from ``host_passes``: override it only for a
        filter that cannot return a ``Rejected`` there."""
        return reason_of(self.host_passes(host_state, spec_obj), self)

    @classmethod
    def name(cls) -> str:
        return cls.__name__


#: Returned by ``RequestScopedFilter.prepare`` when the request asks
#: nothing of this filter: every host passes without being looked at.
SKIP = object()


class RequestScopedFilter(BaseHostFilter):
    """A filter that reads the request once, then tests each host.

    The two stages of kube-scheduler's PreFilter and Filter: ``prepare``
    turns the request into what the test needs (or ``SKIP``), and
    ``passes`` checks one host against it.  ``host_passes`` and
    ``filter_all`` are derived, so the per-host loop never touches the
    versioned request object.  ``passes`` returns True or a
    ``Rejected`` saying why; ``rejection_reason`` is derived from it.
    """

    def prepare(self, spec_obj):
        """What ``passes`` needs from the request, or ``SKIP``."""
        raise NotImplementedError()

    def passes(self, host_state, prepared) -> Verdict:
        """True if ``host_state`` passes, else a ``Rejected`` (or False)."""
        raise NotImplementedError()

    def host_passes(self, host_state, spec_obj) -> Verdict:
        prepared = self.prepare(spec_obj)
        return prepared is SKIP or self.passes(host_state, prepared)

    def filter_all(self, host_states: typing.Iterable, spec_obj) -> list:
        prepared = self.prepare(spec_obj)
        if prepared is SKIP:
            return list(host_states)
        passes = self.passes
        return [host for host in host_states if passes(host, prepared)]


@dataclasses.dataclass
class FilterStep:
    """What one filter did in one pass of the pipeline."""

    name: str
    hosts_in: int
    hosts_out: int
    #: host key "host/nodename" -> reason, when the report is detailed.
    rejected: dict = dataclasses.field(default_factory=dict)

    @property
    def removed(self) -> int:
        return self.hosts_in - self.hosts_out


@dataclasses.dataclass
class FilterReport:
    """The filter walk of a request, for logs, NoValidHost and explain.

    Counts are always kept (they cost nothing); per-host reasons only
    when ``detailed`` is set, since asking every rejecting filter for a
    reason costs a little per host.
    """

    detailed: bool = False
    steps: list = dataclasses.field(default_factory=list)

    def emptied_by(self) -> FilterStep | None:
        for step in self.steps:
            if step.hosts_in and not step.hosts_out:
                return step
        return None

    def summary(self) -> str:
        """One line: ``RamFilter: 50 -> 12, DiskFilter: 12 -> 0``."""
        return ', '.join('%s: %d -> %d' % (s.name, s.hosts_in, s.hosts_out)
                         for s in self.steps)

    def to_dict(self) -> dict:
        return {'steps': [dataclasses.asdict(s) for s in self.steps]}


def host_key(host_state) -> str:
    return '%s/%s' % (host_state.host, host_state.nodename)


class HostFilterHandler:
    """Runs filters in order over the candidate hosts."""

    def get_filtered_objects(self, filters: list, hosts: list, spec_obj,
                             index: int = 0,
                             report: FilterReport | None = None) -> list:
        """Return the hosts that pass every filter, logging the walk.

        The debug log shows each filter's start and end counts, as nova
        does; when a filter leaves no host, one INFO line names it.  On
        a rebuild (``request_is_rebuild``) only filters with
        ``run_on_rebuild`` run, as in nova.
        """
        hosts = list(hosts)
        rebuild = request_is_rebuild(spec_obj)
        for flt in filters:
            if not should_run(flt, index, rebuild):
                continue
            name = flt.name()
            before = hosts
            LOG.debug('Starting with %d host(s) for %s', len(before), name)
            hosts = list(flt.filter_all(before, spec_obj))
            LOG.debug('Filter %s returned %d host(s)', name, len(hosts))
            if report is not None and report.detailed and \
                    len(hosts) < len(before):
                rejected = {}
                kept = {id(h) for h in hosts}
                for host in before:
                    if id(host) not in kept:
                        rejected[host_key(host)] = \
                            flt.rejection_reason(host, spec_obj)
            else:
                rejected = None
            if not record_step(report, name, len(before), len(hosts),
                               spec_obj, rejected):
                break
        return hosts


def should_run(flt, index: int, rebuild: bool) -> bool:
    """Whether ``flt`` runs for the ``index``-th instance (on a rebuild,
    only filters with ``run_on_rebuild`` do, as in nova)."""
    if not flt.run_filter_for_index(index):
        return False
    if rebuild and not getattr(flt, 'run_on_rebuild', False):
        LOG.debug('Skipping %s for a rebuild', flt.name())
        return False
    return True


def record_step(report: FilterReport | None, name: str, hosts_in: int,
                hosts_out: int, spec_obj, rejected: dict | None = None
                ) -> bool:
    """Count one filter's step in ``report``; False (after one INFO
    line) when no host is left and the walk stops.

    One place for the walk's bookkeeping, shared by the handler and the
    columnar path (``scheduler.columns``), so both report alike.
    """
    if report is not None:
        step = FilterStep(name, hosts_in, hosts_out)
        if rejected:
            step.rejected.update(rejected)
        report.steps.append(step)
    if hosts_out:
        return True
    request_id = _request_id(spec_obj)
    if not hosts_in:
        # Nothing to blame a filter for.
        LOG.info('No host to filter for the request with '
                 'instance ID %s', request_id)
        return False
    LOG.info('Filtering removed all hosts for the request with '
             'instance ID %(uuid)s: filter %(name)s left none of '
             '%(count)d host(s). Filter results: %(walk)s',
             {'uuid': request_id, 'name': name, 'count': hosts_in,
              'walk': report.summary() if report else name})
    return False


def _request_id(spec_obj) -> str:
    getter = getattr(spec_obj, 'obj_get', None)
    return (getter('instance_uuid') if getter else None) or '-'
