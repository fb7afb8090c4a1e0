"""IsolatedHostsFilter: isolated images run only on isolated hosts and,
by default, isolated hosts run only isolated images."""

from oslo_config import cfg

from scheduler.filters import base

CONF = cfg.CONF


class IsolatedHostsFilter(base.RequestScopedFilter):
    """Passes hosts allowed for the request's image by
    ``[filter_scheduler] isolated_images`` / ``isolated_hosts``: an
    isolated image only on an isolated host; with
    ``restrict_isolated_hosts_to_isolated_images`` (the default) an
    isolated host only for an isolated image, so an instance booted
    from a volume (no image) never lands on one.
    """

    #: nova runs it for rebuilds (the new image may need another host).
    run_on_rebuild = True

    run_filter_once_per_request = True

    def prepare(self, spec_obj):
        """``(isolated hosts, image isolated?, restrict?)`` or SKIP."""
        fs = CONF.filter_scheduler
        hosts = frozenset(h.strip() for h in fs.isolated_hosts if h.strip())
        images = {i.strip() for i in fs.isolated_images if i.strip()}
        restrict = fs.restrict_isolated_hosts_to_isolated_images
        image = spec_obj.obj_get('image')
        image_id = image.obj_get('id') if image is not None else None
        image_isolated = image_id is not None and image_id in images
        if not image_isolated and (not restrict or not hosts):
            # A plain image may go anywhere the restriction allows.
            return base.SKIP
        return hosts, image_isolated, restrict

    def passes(self, host_state, prepared) -> base.Verdict:
        hosts, image_isolated, restrict = prepared
        host_isolated = host_state.host in hosts
        if image_isolated:
            return host_isolated or base.Rejected(
                'the image is in isolated_images and the host is not in '
                'isolated_hosts')
        return not (restrict and host_isolated) or base.Rejected(
            'the host is in isolated_hosts and takes only isolated_images '
            '(restrict_isolated_hosts_to_isolated_images)')
