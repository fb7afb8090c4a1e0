"""Who sent a message, and what that sender's credential may do.

A request context is whatever its sender wrote, ``is_admin`` included.
What the broker guarantees is the user a message was published by:
RabbitMQ compares the ``user_id`` message property with the login of
the connection that published it and refuses the message when they
differ ("validated user ID").  So:

* every transport this package opens stamps its own login as
  ``user_id`` on what it publishes (``stamp_published_messages``);
* the service reads it off each message it takes (``sender_of``) and
  keeps it on the request context (``sender``), out of the sender's
  reach;
* the rules below decide from it: admin answers and admin casts need
  an operator credential (the service's own user or one of ``[trust]
  admin_users``) as well as an admin context; a compute credential
  speaks only for the hosts ``[trust] compute_users`` gives it.

A message with no ``user_id`` (an older client, a raw publisher) has
no known sender and is trusted with nothing that needs one.  Messages
of the in-process ``fake://`` transport, and contexts made in the
process, come from the service itself (``LOCAL``).
"""

import fnmatch
import functools
import glob
import re
import typing

import kombu.messaging
from oslo_config import cfg
from oslo_config import types
from oslo_log import log as logging
import oslo_messaging

from scheduler import context as scheduler_context
from scheduler import exception
from scheduler.resources import compute

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: The sender of what the service's own process made: a context built
#: here, or a message of the in-process ``fake://`` transport.
LOCAL = scheduler_context.LOCAL_SENDER

#: Where the dispatcher leaves the sender in the message's context
#: dict for the serializer (whatever the message said there is
#: overwritten).
SENDER_KEY = 'scheduler_trusted_sender'

#: The rabbit driver's message type keeps the kombu message it was
#: decoded from under this attribute (oslo.messaging offers no public
#: way to a message's AMQP properties).  tests/unit/test_trust.py fails
#: if a new oslo.messaging moves it.
RAW_MESSAGE_ATTRIBUTE = '_raw_message'

#: The module of oslo.messaging's in-process driver's messages.
FAKE_DRIVER_MODULE = 'oslo_messaging._drivers.impl_fake'


# -- publishing: every message says who sent it ----------------------------

def stamp_published_messages() -> None:
    """Make every kombu publish of this process carry ``user_id``.

    oslo.messaging offers no way to add message properties, so kombu's
    public ``Producer.publish`` is wrapped, once per process: a publish
    without ``user_id`` gets the login of its connection, the only value
    the broker accepts.  A connection without a login name (EXTERNAL)
    leaves it out.
    """
    publish = kombu.messaging.Producer.publish
    if getattr(publish, 'stamps_user_id', False):
        return

    @functools.wraps(publish)
    def stamped(self, body, *args, **properties):
        if 'user_id' not in properties:
            userid = _login_of(self)
            if userid:
                properties['user_id'] = userid
        return publish(self, body, *args, **properties)

    stamped.stamps_user_id = True
    kombu.messaging.Producer.publish = stamped


def _login_of(producer) -> str | None:
    try:
        connection = producer.connection
    except AttributeError:  # a producer not bound to a channel yet
        return None
    login = getattr(connection, 'login_method', None)
    if login and login.upper() == 'EXTERNAL':
        return None
    return getattr(connection, 'userid', None) or None


# -- receiving: who sent this message --------------------------------------

def sender_of(incoming) -> str | None:
    """The broker user that published ``incoming``, as RabbitMQ checked.

    ``LOCAL`` for the in-process ``fake://`` driver; ``None`` when the
    message carries no ``user_id`` or comes from a driver this does not
    know (failing closed: such a sender is trusted with nothing).
    """
    if type(incoming).__module__ == FAKE_DRIVER_MODULE:
        return LOCAL
    return publisher_of(getattr(getattr(incoming, 'message', None),
                                RAW_MESSAGE_ATTRIBUTE, None))


def publisher_of(raw) -> str | None:
    """The ``user_id`` property of kombu message ``raw``, as RabbitMQ
    validated it; None if it carries none."""
    user = (getattr(raw, 'properties', None) or {}).get('user_id')
    if isinstance(user, bytes):
        user = user.decode('utf-8', 'replace')
    return user if isinstance(user, str) and user else None


def note_sender(incoming) -> None:
    """Leave ``incoming``'s sender in its context dict for
    ``take_sender``; called by the dispatcher before it decodes."""
    if isinstance(getattr(incoming, 'ctxt', None), dict):
        incoming.ctxt[SENDER_KEY] = sender_of(incoming)


def take_sender(ctxt: dict) -> str | None:
    """The sender ``note_sender`` left in ``ctxt`` (removed from it).

    A context dict the dispatcher never saw has no known sender.
    """
    return ctxt.pop(SENDER_KEY, None) if isinstance(ctxt, dict) else None


def sender(ctxt) -> str | None:
    """Who sent the message ``ctxt`` came with (``LOCAL`` if none)."""
    return getattr(ctxt, 'sender', LOCAL)


def describe(ctxt) -> str:
    """The sender for a log line."""
    who = sender(ctxt)
    if who is None:
        return 'broker user unknown (no user_id)'
    if who == LOCAL:
        return 'this process'
    return 'broker user %s' % who


# -- what a credential may do ------------------------------------------------

@functools.lru_cache(maxsize=8)
def _url_users(url: str | None) -> frozenset:
    # Cached: asked for every report, and the URL changes only with a
    # restart (it is not a mutable option).
    parsed = oslo_messaging.TransportURL.parse(CONF, url)
    if not (parsed.transport or '').startswith(('rabbit', 'amqp', 'kombu')):
        return frozenset()
    return frozenset({host.username or 'guest' for host in parsed.hosts}
                     or {'guest'})


def operator_users() -> frozenset:
    """Broker users trusted as operators: the service's own login(s)
    and ``[trust] admin_users``.  The one rule: ``is_operator`` asks
    it."""
    return _operators(_url_users(CONF.transport_url),
                      tuple(CONF.trust.admin_users))


@functools.lru_cache(maxsize=8)
def _operators(logins: frozenset, admins: tuple) -> frozenset:
    """The union, made once per configuration, not for every report."""
    return logins | frozenset(admins)


def is_operator(ctxt) -> bool:
    """Whether ``ctxt`` came through an operator's credential."""
    who = sender(ctxt)
    return who == LOCAL or who in operator_users()


def is_admin(ctxt) -> bool:
    """An admin context from an operator's credential.

    ``is_admin`` alone is what the sender wrote; it counts only on a
    message the broker says an operator's credential published.
    """
    return getattr(ctxt, 'is_admin', False) is True and is_operator(ctxt)


@functools.lru_cache(maxsize=1024)
def _matcher(value: str, user: str):
    """The compiled patterns of one ``compute_users`` entry for ``user``.

    ``{user}`` stands for the name itself, never a pattern: a broker
    user named ``c*`` must not own every host named like that (host
    names are validated before, so they hold no pattern characters).
    """
    patterns = [p.strip().replace('{user}', glob.escape(user)).lower()
                for p in value.split('|') if p.strip()]
    if not patterns:
        return None
    return re.compile('|'.join('(?:%s)' % fnmatch.translate(p)
                               for p in patterns))


def owns(user: str | None, host: str, wildcard: bool = True) -> bool:
    """Whether compute credential ``user`` may speak for ``host``;
    without ``wildcard``, only by an entry naming ``user`` itself."""
    matcher = _owned_by(CONF.trust.compute_users, user, wildcard)
    return matcher is not None and matcher.match(host.lower()) is not None


def _owned_by(table: dict, user: str | None, wildcard: bool):
    """The compiled patterns of the hosts ``user`` owns by ``table``
    (``compute_users``), or None for no host."""
    if not user or user == LOCAL:
        return None
    value = table.get(user, table.get('*') if wildcard else None)
    return _matcher(value, user) if value else None


#: The channels a compute's cast may come through: its own topic, which
#: broker permissions keep to computes, or (pre-1.4 clients) the
#: request topic, which callers may publish to as well.
REPORTS_TOPIC = 'reports topic'
REQUEST_TOPIC = 'request topic'


def may_speak_for(ctxt, host: str, channel: str) -> bool:
    """Whether the sender of ``ctxt`` may report about ``host``.

    Operators may for every host.  With ``[trust] compute_users`` set,
    a compute credential for the hosts it owns and no one else; on the
    request topic only a user the option names itself: there the ``*``
    entry would let a caller's user (``*:{user}``) speak for a host
    named like it.  Without the option, any sender on the reports topic
    (the broker keeps it to computes), and no one else on the request
    topic (open to callers).
    """
    return speaker(ctxt, channel)(host)


def speaker(ctxt, channel: str) -> typing.Callable[[str], bool]:
    """``may_speak_for`` of the sender of ``ctxt`` on ``channel``, as a
    function of the host: the sender and the configuration are judged
    once for a message about many hosts (the same rules, read when
    called, never kept)."""
    return speaker_of(sender(ctxt), channel)


def speaker_of(who: str | None, channel: str) -> typing.Callable[[str], bool]:
    """``speaker`` of a message whose sender (``sender``) is ``who``:
    the rules depend on nothing else of a message."""
    if who == LOCAL or who in operator_users():
        return _any_host
    if (channel == REQUEST_TOPIC and who is None
            and CONF.trust.accept_unstamped_legacy_casts):
        # An older release's compute, during the upgrade window.
        return _any_host
    table = CONF.trust.compute_users
    if not table:
        return _any_host if channel == REPORTS_TOPIC else _no_host
    matcher = _owned_by(table, who, channel == REPORTS_TOPIC)
    if matcher is None:
        return _no_host
    return lambda host: matcher.match(host.lower()) is not None


def _any_host(host: str) -> bool:
    return True


def _no_host(host: str) -> bool:
    return False


def refusal(ctxt, what: str) -> exception.NotAuthorized:
    """The error for a refused message, naming the credential."""
    return exception.NotAuthorized(reason='%s refused for %s' % (
        what, describe(ctxt)))


def check_forced_hosts(ctxt, spec_obj, uuids: typing.Sequence = (),
                       placements: typing.Callable | None = None) -> None:
    """``NotAuthorized`` for ``force_hosts`` / ``force_nodes`` or nova's
    rebuild hint (which skips the resource filters) in a request that is
    not an admin's from an operator credential (nova: by API policy),
    unless it rebuilds instances where it forces them
    (``rebuilds_in_place``), as nova's API does for every user's rebuild
    with a new image.
    """
    forced = [key for key in ('force_hosts', 'force_nodes')
              if spec_obj.obj_get(key)]
    rebuild = compute.request_is_rebuild(spec_obj)
    if not (forced or rebuild) or is_admin(ctxt):
        return
    if rebuild and forced and placements is not None and \
            rebuilds_in_place(spec_obj, uuids, placements):
        return
    what = ' and '.join(forced + (['a rebuild check'] if rebuild else []))
    raise exception.NotAuthorized(
        reason='%s need an admin context from an operator credential '
               '(%s; see [trust] admin_users)%s'
               % (what, describe(ctxt),
                  '; a user\'s rebuild forces the host and node each of '
                  'its instances is on, with the resources it has there'
                  if rebuild else ''))


def rebuilds_in_place(spec_obj, uuids: typing.Sequence,
                      placements: typing.Callable) -> bool:
    """Whether the request rebuilds instances where they are.

    ``placements(uuids)``: ``{uuid: {'host', 'nodename', and 'memory_mb',
    'vcpus', 'disk_gb' when its claim is known}}``.  Each instance must
    be on a forced host (and node) and, where its claim is known, ask
    for the resources it holds: nova keeps the flavor on a rebuild, whose
    claim skips the resource filters.
    """
    if not uuids:
        return False
    hosts = {h.lower() for h in spec_obj.obj_get('force_hosts') or ()}
    nodes = set(spec_obj.obj_get('force_nodes') or ())
    found = placements(list(uuids))
    wanted = compute.resources_of(spec_obj)
    for uuid in uuids:
        placed = found.get(uuid)
        if placed is None:
            return False
        if hosts and placed['host'].lower() not in hosts:
            return False
        if nodes and placed['nodename'] not in nodes:
            return False
        if 'memory_mb' in placed and (placed['memory_mb'], placed['vcpus'],
                                      placed['disk_gb']) != wanted:
            return False
    return True


def log_binding() -> None:
    """One line at start: whether reports are bound to credentials."""
    if CONF.trust.compute_users:
        LOG.info('Compute reports are bound to broker users ([trust] '
                 'compute_users): %s', ', '.join(
                     '%s:%s' % kv for kv in
                     sorted(CONF.trust.compute_users.items())))
    else:
        LOG.warning('Compute reports are not bound to broker users: any '
                    'credential allowed to publish on the reports topic '
                    'speaks for every host. Set [trust] compute_users '
                    '(admin guide, "Security and trust")')


# -- host names --------------------------------------------------------------

#: Longest node name (the inventory's column).
MAX_NAME_LENGTH = 255

#: Longest host name: DNS's limit for a name (oslo.config's too).
MAX_HOST_NAME_LENGTH = 253

_HOST_NAME = types.HostDomain()
#: The common case, checked without oslo.config's type (which tries an
#: IP address first and is slow for every report): names it accepts
#: by the same rules.  Anything else is left to it.
_PLAIN_HOST_NAME = re.compile(
    r'(?:(?!-)[A-Za-z0-9_-]{1,63}(?<!-)\.)*'
    r'(?!-)(?=[A-Za-z0-9_-]*[A-Za-z-])[A-Za-z0-9_-]{1,63}(?<!-)\.?\Z')
#: Control characters, and lone surrogates (a JSON "\ud800"), which
#: UTF-8 cannot encode: the database driver refuses them.
_CONTROL = re.compile(r'[\x00-\x1f\x7f\ud800-\udfff]')


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else '%s... (%d characters)' % (
        text[:32], len(value) if isinstance(value, str) else len(text))


def check_host_name(value, what: str = 'host name') -> str:
    """``value`` if it is a valid host name, else ``InvalidRequest``.

    The rules of oslo.config's ``HostDomain`` type: an IP address or
    dot-separated labels of 1 to 63 letters, digits, ``-`` and ``_``
    (no ``-`` at either end, the last label not all digits), at most
    253 characters in all.
    """
    if not isinstance(value, str):
        raise exception.InvalidRequest(
            reason='%s must be a string, not %s' % (what,
                                                    type(value).__name__))
    try:
        # (oslo.config's pattern lets a trailing newline through.)
        # (and its case-insensitive pattern takes the Kelvin sign for
        # a "k" and the long s for an "s": lookalikes of ASCII names.)
        if (len(value) > MAX_HOST_NAME_LENGTH or not value.isascii()
                or _CONTROL.search(value)):
            raise ValueError(value)
        if not _PLAIN_HOST_NAME.match(value):
            _HOST_NAME(value)
    except ValueError:
        raise exception.InvalidRequest(
            reason='%s %s is not a valid host name (letters, digits, "-", '
                   '"_" and dots; labels of 1 to 63 characters; at most '
                   '%d in all)' % (what, _shown(value),
                                   MAX_HOST_NAME_LENGTH))
    return value


def check_node_name(value) -> str:
    """``value`` if it can name a node: nodes are named by their
    hypervisor (a host name, a UUID, ...), so any printable text of 1 to
    255 characters."""
    if (not isinstance(value, str) or not value
            or len(value) > MAX_NAME_LENGTH or _CONTROL.search(value)):
        raise exception.InvalidRequest(
            reason='node name %s is not 1 to %d printable characters'
                   % (_shown(value), MAX_NAME_LENGTH))
    return value
