"""The request context: who asks, from where, under which request id."""

from oslo_context import context

#: The sender of a context made in this process (see scheduler.trust).
LOCAL_SENDER = '<local>'


class RequestContext(context.RequestContext):
    """oslo.context's context plus the caller's source address.

    ``remote_address`` is the address the original request came from
    (an API service sets it from the HTTP request); the IP-prefix
    scheduler places instances by it.

    ``sender`` is the broker user that published the message the
    context came with, as the broker checked it (``scheduler.trust``);
    never read from or written to the wire: the server sets it.
    """

    def __init__(self, remote_address: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.remote_address = remote_address
        self.sender: str | None = LOCAL_SENDER

    def to_dict(self) -> dict:
        values = super().to_dict()
        values['remote_address'] = self.remote_address
        return values

    @classmethod
    def from_dict(cls, values: dict, **kwargs) -> 'RequestContext':
        kwargs.setdefault('remote_address', values.get('remote_address'))
        return super().from_dict(values, **kwargs)

    def elevated(self) -> 'RequestContext':
        """A copy with admin rights, for the scheduler's own look-ups."""
        ctx = self.from_dict(self.to_dict())
        ctx.is_admin = True
        ctx.sender = self.sender
        if 'admin' not in ctx.roles:
            ctx.roles = list(ctx.roles) + ['admin']
        return ctx


class Deferred:
    """The context of a message whose path reads only its sender (a
    liveness message, ``scheduler.alive_consumer``): the
    ``RequestContext`` of the values it came with is built, once, where
    anything else of it is read (a cast back to its compute, a log line
    naming its request).

    ``sender`` is set by the server, as on a ``RequestContext``.
    Building costs as much as the rest of such a message's path, and
    nothing of the values is trusted or checked by building (their
    shape is, before: ``message_limits``).
    """

    __slots__ = ('sender', '_values', '_request')

    def __init__(self, values: dict, sender: str | None):
        self._values = values
        self._request: RequestContext | None = None
        self.sender = sender

    def request(self) -> RequestContext:
        """The ``RequestContext``, now this thread's for its log lines
        (as the RPC server makes every message's)."""
        if self._request is None:
            request = RequestContext.from_dict(self._values)
            request.sender = self.sender
            self._request = request
        return self._request

    def __getattr__(self, name):
        # Only what the class does not have: every field but the sender.
        # Never a private or special name (a copy asks for those before
        # the slots are set).
        if name.startswith('_'):
            raise AttributeError(name)
        return getattr(self.request(), name)


def for_log(ctxt) -> None:
    """Make ``ctxt`` the context of this thread's next log lines, as it
    is already unless deferred (``Deferred``)."""
    if isinstance(ctxt, Deferred):
        ctxt.request().update_store()


def get_admin_context(**kwargs) -> RequestContext:
    """A context for the service's own work (periodic tasks, reports)."""
    return RequestContext(is_admin=True, roles=['admin'], overwrite=False,
                          **kwargs)
