"""AcmeWeigher: keep ACME hosts free for the flavors that need them.

Requests that do not ask for ``acme:foo`` prefer hosts that offer no
ACME hardware, so the ACME hosts stay free for the flavors that do.
Its multiplier is a new option, ``[filter_scheduler]
acme_weight_multiplier``, registered when the module is imported; like
every multiplier, an aggregate's ``acme_weight_multiplier`` metadata
overrides it for the aggregate's hosts.
"""

from oslo_config import cfg

from scheduler import weights

from acme_filters import acme

cfg.CONF.register_opts([
    cfg.FloatOpt(
        'acme_weight_multiplier', default=1.0, min=0.0, mutable=True,
        help='Multiplier of the AcmeWeigher: how strongly requests that '
             'do not ask for acme:foo avoid hosts with ACME hardware. '
             '0.0 disables it.'),
], group='filter_scheduler')


class AcmeWeigher(weights.BaseHostWeigher):
    """1 for a host without ACME hardware, 0 for one with it (or for
    every host when the request asks for acme:foo)."""

    multiplier_option = 'acme_weight_multiplier'

    # Fixed bounds: the weight means the same whatever the candidates
    # are (with observed bounds, all-ACME candidates would all get 0).
    minval = 0.0
    maxval = 1.0

    def _weigh_object(self, host_state, spec_obj) -> float:
        if acme.EXTRA_SPEC in spec_obj.flavor.extra_specs:
            return 0.0
        return 0.0 if acme.offered(host_state) else 1.0
