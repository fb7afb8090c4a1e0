"""AggregateImagePropertiesIsolation: the image's properties match the
metadata of the host's aggregates that set the same keys."""

from oslo_config import cfg

from scheduler.filters import base
from scheduler.resources import aggregates

CONF = cfg.CONF


class AggregateImagePropertiesIsolation(base.RequestScopedFilter):
    """Passes hosts whose aggregates' metadata agree with the image's
    properties: for each image property whose key some aggregate of the
    host sets, the image's value must be one of the aggregate values
    (a comma list).  A host in no aggregate, or in aggregates that set
    none of the image's keys, takes every image.

    With ``aggregate_image_properties_isolation_namespace`` set only
    keys ``<namespace><separator>...`` are compared.

    Limitation (nova bug 1677217): this filter only keeps images *with*
    a property away from hosts whose aggregate wants another value; an
    image without the property passes every host, the isolated ones
    included.  Isolating hosts needs a filter that also rejects images
    lacking the property, or IsolatedHostsFilter for a fixed list of
    image ids.
    """

    #: nova runs it for rebuilds (the new image may need another host).
    run_on_rebuild = True

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        """``[(key, value)]`` of the image properties to compare."""
        props = spec_obj.image_properties
        if not props:
            return base.SKIP
        fs = CONF.filter_scheduler
        namespace = fs.aggregate_image_properties_isolation_namespace
        prefix = (namespace + fs.aggregate_image_properties_isolation_separator
                  if namespace else '')
        checks = [(key, str(value)) for key, value in props.items()
                  if value is not None and str(value) != ''
                  and key.startswith(prefix)]
        return checks or base.SKIP

    @staticmethod
    def _mismatch(host_state, checks):
        for key, value in checks:
            allowed = aggregates.values(host_state, key)
            if allowed and value not in allowed:
                return key, value, allowed
        return None

    def passes(self, host_state, checks) -> base.Verdict:
        found = self._mismatch(host_state, checks)
        if found is None:
            return True
        key, value, allowed = found
        return base.Rejected(
            lambda: 'image property %s=%s is not in the host aggregates\' '
            'values %s' % (key, value, ', '.join(sorted(allowed))))
