"""A broker that refuses our login: a configuration error, not a fault.

oslo.messaging retries an unreachable broker for ever, which is right
for a broker that restarts, but a broker that refuses the user,
password (``ACCESS_REFUSED``) or virtual host (``NOT_ALLOWED``) will
refuse it again.  A process about to join the bus logs in once with
``check()``: a refusal is tried again a few times (a user being
created), then ends the process with one line naming the broker and
the user (``LoginRefused``); any other failure is left to
oslo.messaging's own retries.
"""

import time

from amqp import exceptions as amqp_exceptions
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from scheduler import rpc
from scheduler import urls

LOG = logging.getLogger(__name__)

#: How many logins a refusal gets before the process gives up, and the
#: seconds between two: long enough for a user created by the same
#: deployment step, short enough for systemd to see the failure at once.
ATTEMPTS = 3
INTERVAL = 2.0

#: The AMQP replies that mean "these credentials will not do".
REFUSALS = (amqp_exceptions.AccessRefused, amqp_exceptions.NotAllowed)


class LoginRefused(Exception):
    """The broker refused the configured credentials or virtual host."""

    def __init__(self, broker: str, user: str, reason: str):
        self.broker = broker
        self.user = user
        self.reason = reason
        super().__init__(
            'the message broker %s refused the login of user %r: %s; check '
            'the user, password and virtual host of [DEFAULT] '
            'transport_url' % (broker, user, reason))


def is_refusal(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps) is a refused login."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, REFUSALS):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def describe(error: BaseException, conf: cfg.ConfigOpts | None = None
             ) -> LoginRefused:
    """A refused login, told as ``LoginRefused`` (no password in it)."""
    conf = conf or cfg.CONF
    url = oslo_messaging.TransportURL.parse(conf, conf.transport_url)
    vhost = url.virtual_host or '/'
    brokers = ', '.join('%s:%s%s' % (host.hostname or 'localhost',
                                     host.port or 5672,
                                     vhost if vhost.startswith('/')
                                     else '/' + vhost)
                        for host in url.hosts) or 'localhost:5672/'
    users = sorted({host.username or 'guest' for host in url.hosts}) \
        or ['guest']
    reason = _reason(error)
    reason = urls.mask_secret(reason, conf.transport_url)
    for host in url.hosts:
        reason = urls.hide(reason, host.password)
    return LoginRefused(brokers, ', '.join(users), reason)


def _reason(error: BaseException) -> str:
    """``ACCESS_REFUSED`` / ``NOT_ALLOWED`` and the broker's first words."""
    while error is not None and not isinstance(error, REFUSALS):
        error = error.__cause__ or error.__context__
    if error is None:
        return 'login refused'
    text = str(getattr(error, 'reply_text', '') or error)
    # "ACCESS_REFUSED - Login was refused using authentication mechanism
    # AMQPLAIN. For details see the broker logfile.": the first sentence.
    return text.split('. ')[0].strip()


def check(conf: cfg.ConfigOpts | None = None, attempts: int = ATTEMPTS,
          interval: float = INTERVAL, timeout: float = 10) -> None:
    """Log in to the broker; raise ``LoginRefused`` if it keeps refusing.

    Does nothing for transports that are not RabbitMQ.  A broker that
    cannot be reached is not an error here: oslo.messaging waits for it
    (and logs that it does) when the process joins the bus.
    """
    conf = conf or cfg.CONF
    if not rpc.is_amqp(conf):
        return
    for attempt in range(1, attempts + 1):
        try:
            with rpc.amqp_connection(conf, connect_timeout=timeout) as conn:
                conn.connect()
            return
        except Exception as e:
            if not is_refusal(e):
                LOG.debug('Broker login check: %s (left to the transport)',
                          e)
                return
            if attempt == attempts:
                raise describe(e, conf)
            LOG.debug('Login refused by the broker (%(error)s); trying '
                      'again in %(interval)s s (%(attempt)d/%(attempts)d)',
                      {'error': e, 'interval': interval,
                       'attempt': attempt, 'attempts': attempts})
            time.sleep(interval)
