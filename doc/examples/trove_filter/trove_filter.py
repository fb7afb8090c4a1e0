"""TroveImageFilter: Trove images on Trove hosts, nothing else there.

The filter of Matt Fischer's post on keeping Trove instances on
their own hosts with a nova scheduler filter, written for this
scheduler.  A host is a Trove host when it belongs to an aggregate
named ``Trove``; an image is a Trove image when it has the
``tesora_edition`` property, whatever its value.  Trove images go only
to Trove hosts, and every other request stays off them: images without
the property, and instances booted from a volume (no image at all).

Put this module where the scheduler can import it (pip install your
package, or any directory on its ``PYTHONPATH``) and configure::

    [filter_scheduler]
    available_filters = scheduler.filters.all_filters
    available_filters = trove_filter.TroveImageFilter
    enabled_filters = ComputeFilter,RamFilter,DiskFilter,TroveImageFilter
"""

from scheduler import filters

#: Hosts of an aggregate with this name are Trove hosts.
TROVE_AGGREGATE = 'Trove'
#: Images with this property, whatever its value, are Trove images.
TROVE_PROPERTY = 'tesora_edition'


def is_trove_host(host_state) -> bool:
    return any(agg.name == TROVE_AGGREGATE for agg in host_state.aggregates)


class TroveImageFilter(filters.RequestScopedFilter):
    """Trove images only on Trove hosts; other requests never on them."""

    # The image is the same for every instance of a request: the hosts
    # that passed for the first instance stay right for the others.
    run_filter_once_per_request = True

    def prepare(self, spec_obj) -> bool:
        # Once per request: is this a Trove image?  (No image, as when
        # booting from a volume, means no.)
        return TROVE_PROPERTY in spec_obj.image_properties

    def passes(self, host_state, trove_image: bool):
        # Once per host: a Trove host for a Trove image, any other host
        # for anything else; a refusal says why (explain shows it).
        if is_trove_host(host_state) == trove_image:
            return True
        if trove_image:
            return filters.Rejected(
                'Trove image (%s property) and the host is not in '
                'aggregate %s', TROVE_PROPERTY, TROVE_AGGREGATE)
        return filters.Rejected(
            'not a Trove image (no %s property) and the host is in '
            'aggregate %s', TROVE_PROPERTY, TROVE_AGGREGATE)
