"""The entry point oslo-config-generator uses to list our options."""

import collections

from scheduler import conf as scheduler_conf


def list_opts() -> list:
    """Return ``[(group, [opts])]`` for every group this service owns."""
    merged: dict = collections.OrderedDict()
    for module in scheduler_conf.ALL_MODULES:
        for group, opts in module.list_opts().items():
            merged.setdefault(group, []).extend(opts)
    return list(merged.items())


def set_defaults() -> None:
    """Apply our defaults to library options (for the sample generator)."""
    import oslo_messaging
    scheduler_conf.database.register_opts(scheduler_conf.CONF)
    # The exchange the service really uses (see scheduler.config).
    oslo_messaging.set_transport_defaults(control_exchange='scheduler')
