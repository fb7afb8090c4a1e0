"""Sending what a well-behaved client never sends, for the security tests
and the fuzz script: raw oslo.messaging envelopes over kombu, and calls
that bypass the scheduler's serializer."""

import json
import socket
import uuid

import kombu
import oslo_messaging

from scheduler import rpc

#: The control exchange the scheduler's request topic lives on, by
#: default.
EXCHANGE = 'scheduler'


def raw_client(topic: str, transport=None, timeout: int = 30):
    """An RPC client without our serializer: arguments go as given."""
    return oslo_messaging.get_rpc_client(
        transport or rpc.get_transport(),
        oslo_messaging.Target(topic=topic, version='1.4'), timeout=timeout)


def context(**values) -> dict:
    ctxt = {'user_id': 'mallory', 'project_id': 'evil', 'is_admin': False,
            'roles': []}
    ctxt.update(values)
    return ctxt


def envelope(method, args=None, reply_q=None, version='1.4',
             ctxt=None) -> dict:
    """An oslo.messaging 2.0 envelope for a call (with ``reply_q``) or cast."""
    message = {'method': method, 'args': {} if args is None else args,
               'version': version, 'namespace': None,
               '_unique_id': uuid.uuid4().hex}
    for key, value in (ctxt if ctxt is not None else context()).items():
        message['_context_%s' % key] = value
    if reply_q:
        message['_msg_id'] = uuid.uuid4().hex
        message['_reply_q'] = reply_q
        message['_timeout'] = None
    return {'oslo.version': '2.0', 'oslo.message': json.dumps(message)}


class RawPublisher:
    """One kombu connection publishing raw bodies to a topic."""

    def __init__(self, url: str = 'amqp://guest:guest@127.0.0.1:5672//',
                 exchange: str = EXCHANGE):
        """``exchange``: the service's control exchange."""
        self.conn = kombu.Connection(url, connect_timeout=5)
        self.producer = self.conn.Producer()
        self.exchange = kombu.Exchange(exchange, type='topic',
                                       durable=False, auto_delete=False)

    def publish(self, topic: str, body, content_type='application/json',
                headers=None) -> None:
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        self.producer.publish(body, exchange=self.exchange,
                              routing_key=topic, content_type=content_type,
                              content_encoding='utf-8', headers=headers,
                              retry=True)

    def close(self) -> None:
        self.conn.release()


def nested(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
