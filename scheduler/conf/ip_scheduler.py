"""Options in ``[ip_scheduler]``: the IP-prefix driver's mapping."""

from oslo_config import cfg

ip_group = cfg.OptGroup(
    'ip_scheduler', title='IP-prefix scheduler options',
    help='How the ip_scheduler driver maps the address a request came from '
         'to a subset of hosts.')

ip_opts = [
    cfg.DictOpt(
        'prefix_map',
        default={'10.1': 'doc', '10.2': 'ops'},
        mutable=True,
        help="""
Mapping of request source addresses to hostname prefixes, as
``source:hostname_prefix`` pairs.  A source containing ``/`` is a CIDR
(``10.1.0.0/16``) and matches addresses inside that network; any other
source is a plain text prefix of the address, as in the original
example (beware: ``10.1`` also matches ``10.100.0.7``; use a CIDR to be
exact).  When several sources match, the longest one wins.  The chosen
host is picked at random among up hosts whose name starts with the
mapped prefix.

Related options:

* ``default_host_prefix``: used when no source matches
"""),
    cfg.StrOpt(
        'default_host_prefix',
        default='dev',
        mutable=True,
        help="""
Hostname prefix used for requests whose source address matches no entry
of ``prefix_map`` (and for requests that carry no source address).

Related options:

* ``prefix_map``
"""),
]


def list_opts() -> dict:
    return {ip_group: ip_opts}
