"""One control exchange per benchmark process, deleted when it exits.

oslo.messaging binds every topic queue to the control exchange and never
deletes it.  On the shared broker the default name (``scheduler``) would
be left behind by every benchmark, and would mix a benchmark's topics
with whatever else runs there; a name of the run's own can be deleted
once the run is over.
"""

import atexit
import uuid

from oslo_config import cfg

CONF = cfg.CONF
NAME = 'bench-exchange-%s' % uuid.uuid4().hex[:8]
_used = False


def default_section() -> str:
    """The ``[DEFAULT]`` header and this exchange's line, to open the
    configuration file of a benchmark's own process; also points this
    process at the exchange."""
    use()
    return '[DEFAULT]\ncontrol_exchange = %s\n' % NAME


def use(name: str | None = None) -> None:
    """This process's transports use :data:`NAME`, deleted at exit; or
    ``name``, a parent benchmark's exchange, which the parent deletes.

    Call it before the process makes its first transport.
    """
    global _used
    if name:
        CONF.set_override('control_exchange', name)
    elif not _used:
        _used = True
        CONF.set_override('control_exchange', NAME)
        atexit.register(_delete)


def _delete() -> None:
    from scheduler import rpc
    try:
        with rpc.amqp_connection(CONF, connect_timeout=5) as connection:
            rpc.delete_names(connection, [], [NAME])
    except Exception as e:   # an exit hook must not hide the run's output
        print('Could not delete the exchange %s: %s' % (NAME, e))
