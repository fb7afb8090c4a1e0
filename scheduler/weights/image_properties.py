"""ImagePropertiesWeigher: pack instances of like images together, or
spread them apart."""

from oslo_config import cfg
from oslo_log import log as logging

from scheduler.weights import base

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


def parse_setting(entries: list) -> dict:
    """``{property: ratio}`` of ``image_props_weight_setting`` entries.

    An entry that is not ``name=ratio`` with a numeric ratio is logged
    and ignored.
    """
    setting = {}
    for entry in entries:
        name, sep, ratio = str(entry).partition('=')
        try:
            if not (sep and name.strip()):
                raise ValueError(entry)
            setting[name.strip()] = float(ratio)
        except ValueError:
            LOG.warning('[filter_scheduler] image_props_weight_setting: '
                        'ignoring %r, which is not name=ratio', entry)
    return setting


def requested_properties(spec_obj) -> list:
    """``name=value`` keys of the request's image properties."""
    image = spec_obj.obj_get('image')
    if image is None:
        return []
    return ['%s=%s' % (name, value)
            for name, value in sorted(image.properties.items())
            if value is not None]


class ImagePropertiesWeigher(base.BaseHostWeigher):
    """Weighs hosts by how many of their instances run an image sharing
    properties with the requested image, as nova does: the raw weight
    is, for each property of the requested image, the number of the
    host's instances whose image has the same value, summed (times the
    property's ratio when ``image_props_weight_setting`` is set, where
    an unlisted property counts 0).  The counts come from the
    ``instance_image_properties`` the compute reports.

    A positive ``image_props_weight_multiplier`` packs like instances;
    a negative one spreads them; the default ``0.0`` turns the weigher
    off (as in nova, an aggregate override alone does not turn it on).
    """

    multiplier_option = 'image_props_weight_multiplier'

    def weigh_columns(self, columns, spec_obj):
        """0 everywhere when off or for an image without properties;
        else None (per host)."""
        if CONF.filter_scheduler.image_props_weight_multiplier == 0.0 or \
                not requested_properties(spec_obj):
            return 0.0
        return None

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        if CONF.filter_scheduler.image_props_weight_multiplier == 0.0:
            return [0.0] * len(weighed_hosts)
        wanted = requested_properties(spec_obj)
        if not wanted:
            return [0.0] * len(weighed_hosts)
        setting = parse_setting(
            CONF.filter_scheduler.image_props_weight_setting)
        if setting:
            ratios = [setting.get(key.partition('=')[0], 0.0)
                      for key in wanted]
        else:
            ratios = [1.0] * len(wanted)
        weights = []
        for w in weighed_hosts:
            counts = w.obj.instance_image_properties
            weights.append(float(sum(counts.get(key, 0) * ratio
                                     for key, ratio in zip(wanted, ratios))))
        return weights
