"""Options in ``[trust]``: which broker credential may do what.

A request context is whatever its sender wrote.  What the service can
believe is the broker user that published a message: RabbitMQ checks
the ``user_id`` message property against the connection's login and
refuses a message that lies about it.  These options map broker users
to what they may do (see ``scheduler.trust`` and the admin guide,
"Security and trust").
"""

from oslo_config import cfg

trust_group = cfg.OptGroup(
    'trust', title='Trusted credentials',
    help='Which broker users may report which hosts, and whose admin '
         'contexts are believed.')

trust_opts = [
    cfg.DictOpt(
        'compute_users',
        default={},
        mutable=True,
        help="""
Binds compute credentials to the hosts they own: ``user:pattern`` pairs,
comma separated.  A message on the reports topic (a report, an instance
update, sync or deletion) is taken only when the broker user that
published it (RabbitMQ's validated ``user_id`` message property) is
listed here and the host it is about matches the user's pattern;
anything else is refused with one WARNING line naming the user and the
host.  A pattern is a shell-style pattern on host names (``*``, ``?``,
``[...]``, case ignored); several are separated by ``|``; ``{user}``
stands for the user's name, as it is (never as a pattern).  The user
``*`` applies to every user not listed (on the reports topic only:
compute casts that older clients send on the request topic, where
callers publish too, are taken only from users named here).  Examples:

* ``*:{user}``: one broker user per compute, named like its host (the
  setup the admin guide describes step by step)
* ``rack7:rack7-*|spare-3, rack8:rack8-*``: one user per rack
* ``nova:*``: one shared credential for every host (no binding)

Empty (the default): no binding; any credential allowed to publish on
the reports topic speaks for every host (a WARNING at start says so).
The service's own user and ``admin_users`` may speak for every host.

Related options:

* ``admin_users``: credentials trusted for every host and as admins
* ``[scheduler] accept_legacy_casts``: the request topic takes compute
  casts only from the credentials this option names
"""),
    cfg.ListOpt(
        'admin_users',
        default=[],
        mutable=True,
        help="""
Broker users, besides the service's own (the user of ``[DEFAULT]
transport_url``), whose messages may carry an admin context: only from
them does ``is_admin`` count.  An admin context from any other
credential is treated as a user's: no filter walk in ``NoValidHost``,
no per-host ranking or rejections from ``explain``, no ``force_hosts``
or ``force_nodes`` (``NotAuthorized``), no aggregate casts, and no
instance sync or deletion for a host the credential does not own.
List here the credential ``scheduler-manage`` uses if it is not the
service's, and a conductor's if it relays its API's admin requests
(nova lets only admins force a host, by API policy).

Related options:

* ``compute_users``: what compute credentials may report
"""),
    cfg.BoolOpt(
        'accept_unstamped_legacy_casts',
        default=False,
        mutable=True,
        help="""
For a rolling upgrade in which the scheduler is upgraded before its
computes: take compute casts (reports, instance news) that arrive on
the request topic without a ``user_id`` message property.  Releases
before this option existed neither stamp their broker login on what
they publish nor use the reports topic, so a scheduler of this release
refuses their reports (no host appears) unless this is set.  Anyone
who may publish on the request topic can then report any host: turn it
off again (a SIGHUP applies it) once every compute runs this release.
Upgrading callers and computes first, as the admin guide's rolling
upgrade section says, needs no such window.

Related options:

* ``compute_users``: who may report which host once every sender
  stamps its login
* ``[scheduler] accept_legacy_casts``: the request topic takes compute
  casts at all
"""),
]


def list_opts() -> dict:
    return {trust_group: trust_opts}
