"""Every configuration option of the scheduler, registered on ``cfg.CONF``.

One module per option group; each has ``register_opts(conf)`` and
``list_opts()``.  ``scheduler.conf.opts`` gathers them for
oslo-config-generator.
"""

from oslo_config import cfg

from scheduler.conf import catalogue
from scheduler.conf import compute
from scheduler.conf import database
from scheduler.conf import default
from scheduler.conf import filter_scheduler
from scheduler.conf import ip_scheduler
from scheduler.conf import limits
from scheduler.conf import prometheus
from scheduler.conf import scheduler
from scheduler.conf import trace
from scheduler.conf import trust
from scheduler.conf import upgrade_levels

CONF = cfg.CONF

ALL_MODULES = (default, scheduler, filter_scheduler, ip_scheduler, compute,
               upgrade_levels, database, catalogue, prometheus, limits,
               trust, trace)

for _module in ALL_MODULES:
    _module.register_opts(CONF)
