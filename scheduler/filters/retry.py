"""RetryFilter: the host was not already tried for this instance."""

from scheduler.filters import base


class RetryFilter(base.RequestScopedFilter):
    """Passes hosts (host, node) not in the request's ``retry.hosts``:
    when a build failed and the instance is rescheduled, the nodes that
    already failed it are not tried again.  An entry naming only a host
    excludes all its nodes.
    """

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        retry = spec_obj.obj_get('retry')
        tried = retry.obj_get('hosts') if retry is not None else None
        if not tried:
            return base.SKIP
        nodes = frozenset(tuple(pair[:2]) for pair in tried
                          if len(pair) >= 2)
        hosts = frozenset(pair[0] for pair in tried if len(pair) == 1)
        return nodes, hosts, retry.obj_get('num_attempts', 0)

    def passes(self, host_state, tried) -> base.Verdict:
        nodes, hosts, attempt = tried
        return ((host_state.host, host_state.nodename) not in nodes
                and host_state.host not in hosts) or base.Rejected(
            'already tried for this instance (attempt %d)', attempt)
