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


def _error(name: str, msg_fmt: str, base: type = SchedulerException,
           doc: str | None = None) -> type:
    """A subclass ``name`` of ``base`` that only sets its message (a real
    class of this module, as oslo.messaging looks it up by name)."""
    return type(name, (base,), {'msg_fmt': msg_fmt, '__doc__': doc,
                                '__module__': __name__})


NoValidHost = _error('NoValidHost', 'No valid host was found. %(reason)s')
InvalidRequest = _error(
    'InvalidRequest', 'Invalid scheduling request: %(reason)s',
    doc='The request is well formed on the wire but makes no sense.')
NotAuthorized = _error(
    'NotAuthorized', 'Not authorized: %(reason)s',
    doc="The caller's context lacks the rights the operation needs.")
MalformedObject = _error(
    'MalformedObject', 'Malformed %(what)s: %(reason)s',
    doc='A versioned object on the wire could not be read.')
IncompatibleObjectVersion = _error(
    'IncompatibleObjectVersion',
    'Object %(objname)s version %(objver)s is not supported by this '
    'service (it knows up to %(supported)s)', MalformedObject)
SchedulerDriverNotFound = _error(
    'SchedulerDriverNotFound',
    'Scheduler driver %(name)r from [scheduler] driver was not found as '
    'an entry point in %(namespace)s nor as a class path: %(reason)s')
SchedulerHostFilterNotFound = _error(
    'SchedulerHostFilterNotFound',
    'Scheduler host filter %(filter_name)s could not be found.')
SchedulerWeigherNotFound = _error(
    'SchedulerWeigherNotFound',
    'Scheduler weigher %(name)s could not be found.')
PluginLoadError = _error('PluginLoadError',
                         'Could not load %(kind)s %(name)r: %(reason)s')
PluginFailed = _error(
    'PluginFailed',
    'Plugin %(plugin)s (package %(package)s) failed on this request: '
    '%(error)s; the scheduler log has its traceback',
    doc="A filter, weigher or driver from outside the scheduler package "
        "raised while serving the request, or returned what the "
        "scheduler cannot use (``plugin_outputs``): the plugin's fault, "
        "not the caller's (``rpc.Dispatcher``), logged once at ERROR "
        "with its traceback for the operator.")
HostNotFound = _error('HostNotFound', 'Host %(host)s could not be found.')
AggregateNotFound = _error('AggregateNotFound',
                           'Aggregate %(aggregate)s could not be found.')
AggregateNameExists = _error('AggregateNameExists',
                             'Aggregate %(name)s already exists.')
AggregateHostExists = _error(
    'AggregateHostExists',
    'Host %(host)s is already in aggregate %(aggregate)s.')
AggregateHostUnknown = _error(
    'AggregateHostUnknown',
    'Host %(host)s is not known to the inventory (it has never reported); '
    'check the name, or pass --allow-unknown to add it before it reports.')
AggregateZoneConflict = _error(
    'AggregateZoneConflict',
    'Host %(host)s would be in two availability zones: %(zone)r of '
    'aggregate %(aggregate)s and %(other_zone)r of aggregate %(other)s. A '
    'host belongs to at most one zone, as in nova.')
AggregateHostNotFound = _error(
    'AggregateHostNotFound',
    'Host %(host)s is not in aggregate %(aggregate)s.')
ConfigurationError = _error('ConfigurationError',
                            'Invalid configuration: %(reason)s')
InstanceAlreadyPlaced = _error(
    'InstanceAlreadyPlaced',
    'Instance %(instance_uuid)s is already being placed on '
    '%(host)s/%(nodename)s; release that claim (or wait for the compute to '
    'confirm it) before placing it again.', InvalidRequest,
    doc='A claim for an instance pending on another node, by a *different* '
        'request naming the same uuid (a retry of the same request gets '
        'the placements already made instead).')
CastTakenOver = _error(
    'CastTakenOver', 'Cast %(cast_id)s was taken over by another worker.',
    doc='Another worker took over a ``schedule_run_instance`` cast this '
        'one was serving (``scheduler.db.taken_casts``): the claim that '
        'found it out was rolled back, and this worker stops serving the '
        'cast.  Never sent to callers (a cast has none).')
CastHandedBack = _error(
    'CastHandedBack', 'Cast %(cast_id)s is left to another worker: this one '
    'is stopping.',
    doc='The service stops: a ``schedule_run_instance`` cast it took and '
        'has not finished keeps its row (``scheduler.db.taken_casts``) '
        'for another worker to take over, and this one stops serving it '
        'before its next instance.  Never sent to callers.')
ClaimConflict = _error(
    'ClaimConflict',
    'Node %(host)s/%(nodename)s can no longer take the claim.',
    doc='A node filled up (or changed) between choosing it and claiming '
        'it.  Normal under concurrency, never sent to callers: the driver '
        'tries the next-best candidate.')
HostInUse = _error(
    'HostInUse',
    'Host %(host)s has %(count)d placement(s); move or delete them first, '
    'or force the deletion (their resources are then free everywhere).')
WeigherConfigurationError = _error(
    'WeigherConfigurationError',
    'Weigher %(weigher)s is misconfigured: %(reason)s', ConfigurationError,
    doc="A weigher cannot weigh with the configuration it was given: an "
        "operator's problem, so the caller gets this instead of "
        "NoValidHost, naming the weigher and what to change.")
InventoryUnavailable = _error(
    'InventoryUnavailable',
    'The scheduler inventory is unavailable, retry later: %(reason)s',
    doc='The inventory database is away, restarting or out of '
        'connections; raised to callers (``select_destinations``, '
        '``explain``) with nothing claimed.  Transient: the same request '
        'succeeds once it is back.')
InventorySchemaUnknown = _error(
    'InventorySchemaUnknown',
    'the inventory schema is at revision %(revision)s, which this release '
    'does not know (its newest is %(head)s): a newer release upgraded it '
    '(db sync). Run that release here, or restore the database from '
    'before that upgrade',
    doc='``db sync`` and the service refuse a schema a newer release made: '
        'this code cannot tell whether its tables still fit it.')
BrokerUnreachable = _error(
    'BrokerUnreachable',
    'cannot reach the message bus at %(url)s: %(reason)s',
    doc='The message bus did not take a connection (command-line tools).')
SchedulerTooOld = _error(
    'SchedulerTooOld',
    'Not sending %(method)s at scheduler RPC API %(needed)s: no scheduler '
    'on topic %(topic)s would hear it (%(why)s). Set [upgrade_levels] '
    "scheduler = auto (or the schedulers' version) on this node for the "
    'rolling upgrade',
    doc='Raised by ``SchedulerAPI`` before anything is sent, when '
        '``[upgrade_levels] scheduler`` is unset during a rolling '
        'upgrade: the casts would go where the older scheduler never '
        'looks; or when a request capped at 1.0 sets a field the legacy '
        'dicts cannot carry.')
