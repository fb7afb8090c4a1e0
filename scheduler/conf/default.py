"""Options in ``[DEFAULT]`` that belong to this service."""

import os
import socket

from oslo_config import cfg

default_opts = [
    cfg.HostAddressOpt(
        'host',
        default=socket.gethostname(),
        sample_default='<current_hostname>',
        help="""
Name of this node, used as the RPC server name of the scheduler service
(``Target(topic=[scheduler] topic, server=host)``) and, in the compute
simulator, as the prefix of the simulated host names.

Must be a valid hostname, FQDN or IP address, and unique among the
schedulers on one message bus.

Related options:

* ``[scheduler] topic``
"""),
    cfg.StrOpt(
        'state_path',
        default=os.path.join(os.path.expanduser('~'), '.local', 'state',
                             'scheduler'),
        sample_default='~/.local/state/scheduler',
        help="""
Top-level directory for the scheduler's state: the default SQLite
inventory lives here.  Created at start-up when missing.  Packaged
installations set it to ``/var/lib/scheduler``.

Related options:

* ``[database] connection`` (its default is a file under this directory)
"""),
    cfg.StrOpt(
        'default_availability_zone',
        default='nova',
        help="""
Availability zone of hosts that belong to no aggregate with an
``availability_zone`` metadata key.  A request for this zone may land
on any such host; a request for another zone only on hosts of an
aggregate in that zone.

Related options:

* ``[filter_scheduler] enabled_filters`` (AvailabilityZoneFilter)
"""),
]


def list_opts() -> dict:
    return {'DEFAULT': default_opts}
