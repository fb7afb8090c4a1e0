"""Options in ``[prometheus]``: the service's own metrics endpoint."""

from oslo_config import cfg
from oslo_config import types

prometheus_group = cfg.OptGroup(
    'prometheus', title='Prometheus metrics endpoint options',
    help='Whether and where the scheduler serves its own metrics '
         '(requests, placements, filter eliminations, hosts) in the '
         'Prometheus text format.')

DEFAULT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                   0.5, 1.0, 2.5, 5.0, 10.0]

prometheus_opts = [
    cfg.BoolOpt(
        'enabled',
        default=False,
        help="""
Serve the scheduler's metrics at ``GET /metrics`` on ``bind_host`` and
``port`` in the Prometheus text format.

Every worker process binds the same port (SO_REUSEPORT) and counts with
prometheus_client in multiprocess mode, in files under
``<state_path>/metrics`` (emptied when the service starts); whichever
worker answers a scrape reads every process's files, so one scrape
shows the whole service.  When the port is taken by another program the
service logs an error and runs without the endpoint.

Related options:

* ``bind_host``, ``port``: where the endpoint listens
* ``[DEFAULT] state_path``: holds the per-process files
* ``[scheduler] workers``
"""),
    cfg.HostAddressOpt(
        'bind_host',
        default='127.0.0.1',
        help="""
Address the metrics endpoint listens on.  The endpoint has no
authentication or TLS and tells anyone who asks how busy the cloud is:
keep it on the loopback address or on a management network that only
the Prometheus server can reach.

Related options:

* ``enabled``
* ``port``
"""),
    cfg.PortOpt(
        'port',
        default=9595,
        help="""
TCP port of the metrics endpoint.  All workers of one service listen on
this port together; it must not be used by another program or by a
second scheduler service on the same address.

Related options:

* ``enabled``
* ``bind_host``
"""),
    cfg.ListOpt(
        'histogram_buckets',
        item_type=types.Float(min=0),
        default=DEFAULT_BUCKETS,
        help="""
Upper bounds, in seconds, of the buckets of the request duration
histogram ``scheduler_request_duration_seconds``.  A ``+Inf`` bucket is
always added.  More buckets give finer quantiles at the price of more
series.  Read at start-up; every worker of a service should use the
same list.

Related options:

* ``enabled``
"""),
]


def list_opts() -> dict:
    return {prometheus_group: prometheus_opts}
