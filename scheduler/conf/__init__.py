"""Every configuration option of the scheduler, registered on ``cfg.CONF``.

One module per option group, each with ``list_opts()`` (``{group:
[opts]}``), which registers them here and ``scheduler.conf.opts``
gathers for oslo-config-generator; ``database`` only sets oslo.db's
defaults.
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
    for _group, _opts in _module.list_opts().items():
        CONF.register_opts(_opts, group=None if _group == 'DEFAULT'
                           else _group)
database.register_opts(CONF)
