"""What a stopping RPC server took off the bus is served, not dropped.

oslo.messaging's RabbitMQ listener acknowledges a message as soon as
its connection receives it.  ``stop()`` ends the listener's poll loop
but leaves its consumer registered at the broker until ``wait()``
closes the connection; meanwhile the heartbeat thread keeps reading, so
every message pushed is acknowledged into a list nobody polls: casts
queued during a stop would be lost without a trace.

``serve_taken(server)``, between ``stop()`` and ``wait()``: cancels the
listener's consumers at the broker (whatever is still queued stays
there for the next service on the topic: handed back, not taken), then
gives what was already acknowledged to the server's executor, which
``wait()`` lets finish, without the bound on what it holds (no
consumer is left to hold back).  oslo.messaging has no public API for either:
the attributes used are checked by tests/unit/test_taken_messages.py,
and without them (another oslo.messaging or driver) nothing is done.
"""

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def _listener(server):
    """The driver listener behind ``server``'s adapter, if AMQP."""
    adapter = getattr(server, 'listener', None)
    return getattr(adapter, '_poll_style_listener', None)


def _cancel_consumers(listener) -> None:
    """Make the broker stop delivering to ``listener``'s connection.

    Under the connection's lock, as the driver's own ``reset`` does: the
    heartbeat thread reads the same connection.  Each cancel waits for
    the broker's answer, so deliveries sent before it are read (and
    queued on the listener) by the time it returns.  A broker that
    stopped answering holds it as it would hold the connection's close
    in ``wait()``; one that is gone fails it at once.
    """
    context = getattr(listener, 'conn', None)
    connection = getattr(context, 'connection', None)
    lock = getattr(connection, '_connection_lock', None)
    consumers = getattr(connection, '_consumers', None)
    if lock is None or not isinstance(consumers, dict):
        return
    with lock:
        for consumer, tag in list(consumers.items()):
            try:
                consumer.cancel(tag=tag)
            except Exception as e:  # a broken connection delivers nothing
                LOG.debug('Could not cancel consumer %s: %s', tag, e)


def serve_taken(server) -> int:
    """Hand what ``server`` (stopped, not waited) took to its workers.

    Returns how many messages were taken after its poll loop ended.
    """
    listener = _listener(server)
    incoming = getattr(listener, 'incoming', None)
    submit = getattr(server, '_on_incoming', None)
    if not isinstance(incoming, list) or submit is None:
        return 0
    _cancel_consumers(listener)
    # Into the executor's queue at once: waiting for its slots
    # (``rpc.bound_intake``) behind a backlog could outlast the stop's
    # wait for this, and what is left would then be dropped unserved.
    unbound = getattr(getattr(server, '_work_executor', None), 'unbound',
                      None)
    if unbound is not None:
        unbound()
    taken = 0
    while incoming:
        submit([incoming.pop(0)])
        taken += 1
    if taken:
        LOG.info('Serving %d message(s) taken off the bus while stopping',
                 taken)
    return taken
