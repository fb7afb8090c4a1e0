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


def get_admin_context(**kwargs) -> RequestContext:
    """A context for the service's own work (periodic tasks, reports)."""
    return RequestContext(is_admin=True, roles=['admin'], overwrite=False,
                          **kwargs)
