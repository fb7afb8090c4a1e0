"""Typed errors.

Every error a caller may handle derives from ``SchedulerException`` and
lives in this module, which the RPC transport lists in
``allowed_remote_exmods``: raised in the service, it is re-raised with
the same type in the caller, over RabbitMQ as over ``fake://``.
"""


class SchedulerException(Exception):
    """Base of the scheduler's typed errors.

    Subclasses set ``msg_fmt``; keyword arguments fill it in and stay
    available as ``self.kwargs``.
    """

    msg_fmt = 'An unknown scheduler error occurred.'

    def __init__(self, message: str | None = None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError):
                message = self.msg_fmt
        self.message = message
        super().__init__(message)

    def format_message(self) -> str:
        return self.message


class NoValidHost(SchedulerException):
    msg_fmt = 'No valid host was found. %(reason)s'


class InvalidRequest(SchedulerException):
    """The request is well formed on the wire but makes no sense."""

    msg_fmt = 'Invalid scheduling request: %(reason)s'


class NotAuthorized(SchedulerException):
    """The caller's context lacks the rights the operation needs."""

    msg_fmt = 'Not authorized: %(reason)s'


class MalformedObject(SchedulerException):
    """A versioned object on the wire could not be read."""

    msg_fmt = 'Malformed %(what)s: %(reason)s'


class IncompatibleObjectVersion(MalformedObject):
    msg_fmt = ('Object %(objname)s version %(objver)s is not supported by '
               'this service (it knows up to %(supported)s)')


class SchedulerDriverNotFound(SchedulerException):
    msg_fmt = ('Scheduler driver %(name)r from [scheduler] driver was not '
               'found as an entry point in %(namespace)s nor as a class '
               'path: %(reason)s')


class SchedulerHostFilterNotFound(SchedulerException):
    msg_fmt = 'Scheduler host filter %(filter_name)s could not be found.'


class SchedulerWeigherNotFound(SchedulerException):
    msg_fmt = 'Scheduler weigher %(name)s could not be found.'


class PluginLoadError(SchedulerException):
    msg_fmt = 'Could not load %(kind)s %(name)r: %(reason)s'


class HostNotFound(SchedulerException):
    msg_fmt = 'Host %(host)s could not be found.'


class AggregateNotFound(SchedulerException):
    msg_fmt = 'Aggregate %(aggregate)s could not be found.'


class AggregateNameExists(SchedulerException):
    msg_fmt = 'Aggregate %(name)s already exists.'


class AggregateHostExists(SchedulerException):
    msg_fmt = 'Host %(host)s is already in aggregate %(aggregate)s.'


class AggregateHostUnknown(SchedulerException):
    msg_fmt = ('Host %(host)s is not known to the inventory (it has never '
               'reported); check the name, or pass --allow-unknown to add '
               'it before it reports.')


class AggregateZoneConflict(SchedulerException):
    msg_fmt = ('Host %(host)s would be in two availability zones: '
               '%(zone)r of aggregate %(aggregate)s and %(other_zone)r of '
               'aggregate %(other)s. A host belongs to at most one zone, '
               'as in nova.')


class AggregateHostNotFound(SchedulerException):
    msg_fmt = 'Host %(host)s is not in aggregate %(aggregate)s.'


class ConfigurationError(SchedulerException):
    msg_fmt = 'Invalid configuration: %(reason)s'


class InstanceAlreadyPlaced(InvalidRequest):
    """A claim for an instance that is pending on another node.

    A caller retrying the same request gets the placements already made
    instead; this is for a *different* request naming the same uuid.
    """

    msg_fmt = ('Instance %(instance_uuid)s is already being placed on '
               '%(host)s/%(nodename)s; release that claim (or wait for the '
               'compute to confirm it) before placing it again.')


class CastTakenOver(SchedulerException):
    """Another worker took over a ``schedule_run_instance`` cast this
    one was serving (``scheduler.db.taken_casts``): the claim that found
    it out was rolled back, and this worker stops serving the cast.

    Never sent to callers (a cast has none).
    """

    msg_fmt = 'Cast %(cast_id)s was taken over by another worker.'


class ClaimConflict(SchedulerException):
    """A node filled up (or changed) between choosing it and claiming it.

    Normal under concurrency, never sent to callers: the driver tries
    the next-best candidate.
    """

    msg_fmt = 'Node %(host)s/%(nodename)s can no longer take the claim.'


class HostInUse(SchedulerException):
    msg_fmt = ('Host %(host)s has %(count)d placement(s); move or delete '
               'them first, or force the deletion (their resources are '
               'then free everywhere).')


class WeigherConfigurationError(ConfigurationError):
    """A weigher cannot weigh with the configuration it was given.

    An operator's problem, not the request's: the caller gets this
    instead of NoValidHost, naming the weigher and what to change.
    """

    msg_fmt = 'Weigher %(weigher)s is misconfigured: %(reason)s'


class InventoryUnavailable(SchedulerException):
    """The inventory database cannot be used right now: retry later.

    Raised to callers (``select_destinations``, ``explain``) while the
    database is away, restarting or out of connections; nothing was
    claimed.  Transient: the same request succeeds once it is back.
    """

    msg_fmt = ('The scheduler inventory is unavailable, retry later: '
               '%(reason)s')


class BrokerUnreachable(SchedulerException):
    """The message bus did not take a connection (command-line tools)."""

    msg_fmt = 'cannot reach the message bus at %(url)s: %(reason)s'


class SchedulerTooOld(SchedulerException):
    """The scheduler cannot read what this client would send.

    Raised by ``SchedulerAPI`` at the sender, before anything is sent,
    when ``[upgrade_levels] scheduler`` is unset during a rolling
    upgrade: the casts would go where the older scheduler never looks.
    """

    msg_fmt = ('Not sending %(method)s at scheduler RPC API %(needed)s: '
               'no scheduler on topic %(topic)s would hear it (%(why)s). '
               'Set [upgrade_levels] scheduler = auto (or the schedulers\' '
               'version) on this node for the rolling upgrade')
