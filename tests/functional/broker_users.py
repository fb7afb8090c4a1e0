"""Broker users and permissions exactly as the admin guide sets them up.

``GUIDE_COMMANDS`` are the ``rabbitmqctl`` lines of doc/admin-guide.md
("Security and trust"), with the guide's names as placeholders;
tests/unit/test_trust_doc.py checks the guide prints them, and the
functional tests run them on a throw-away vhost with their own names.
"""

import shlex
import shutil
import subprocess
import uuid

import pytest

from tests.functional import daemons

#: The guide's names: vhost ``openstack``, users ``scheduler``,
#: ``conductor`` and ``compute-001`` (a compute named like its host),
#: request topic ``scheduler`` on the control exchange ``scheduler``.
GUIDE_NAMES = {'vhost': 'openstack', 'service': 'scheduler',
               'caller': 'conductor', 'compute': 'compute-001',
               'topic': 'scheduler', 'exchange': 'scheduler'}

#: ``$...`` stand for each user's password.
GUIDE_COMMANDS = [
    "rabbitmqctl add_vhost {vhost}",
    "rabbitmqctl add_user {service} \"$SCHEDULER_PASSWORD\"",
    "rabbitmqctl set_permissions -p {vhost} {service} '.*' '.*' '.*'",
    "rabbitmqctl add_user {caller} \"$CONDUCTOR_PASSWORD\"",
    "rabbitmqctl set_permissions -p {vhost} {caller} "
    "'^({exchange}|reply_.*)$' '^({exchange}|reply_.*)$' '^reply_.*'",
    "rabbitmqctl set_topic_permissions -p {vhost} {caller} {exchange} "
    "'^{topic}$' '^$'",
    "rabbitmqctl add_user {compute} \"$COMPUTE_PASSWORD\"",
    "rabbitmqctl set_permissions -p {vhost} {compute} "
    "'^{topic}_reports(_fanout)?$' '^{topic}_reports(_fanout)?$' '^$'",
]

#: What ``[trust]`` says in the guide's setup.
GUIDE_TRUST_CONFIG = "compute_users = *:{user}"


def guide_lines(names: dict = GUIDE_NAMES) -> list:
    return [line.format(**names) for line in GUIDE_COMMANDS]


def _rabbitmqctl(args: list, check: bool = True) -> None:
    subprocess.run(['rabbitmqctl', '-q'] + args, check=check,
                   capture_output=True, timeout=60)


class BrokerUsers:
    """A private vhost and the guide's three users, unique names."""

    def __init__(self, topic: str):
        tag = uuid.uuid4().hex[:8]
        self.topic = topic
        self.vhost = 'sched-trust-%s' % tag
        self.names = {'vhost': self.vhost, 'topic': topic,
                      'exchange': 'scheduler'}
        self.passwords = {}
        for role in ('service', 'caller', 'compute'):
            self.names[role] = 'sched-%s-%s' % (role, tag)
            self.passwords[role] = uuid.uuid4().hex

    def create(self) -> None:
        """Run the guide's lines with these names and passwords."""
        secrets = {'$SCHEDULER_PASSWORD': self.passwords['service'],
                   '$CONDUCTOR_PASSWORD': self.passwords['caller'],
                   '$COMPUTE_PASSWORD': self.passwords['compute']}
        for line in guide_lines(self.names):
            args = [secrets.get(arg, arg) for arg in shlex.split(line)]
            assert args[0] == 'rabbitmqctl'
            _rabbitmqctl(args[1:])

    def delete(self) -> None:
        for role in ('service', 'caller', 'compute'):
            _rabbitmqctl(['delete_user', self.names[role]], check=False)
        _rabbitmqctl(['delete_vhost', self.vhost], check=False)

    def user(self, role: str) -> str:
        return self.names[role]

    def url(self, role: str, scheme: str = 'rabbit') -> str:
        return '%s://%s:%s@127.0.0.1:5672/%s' % (
            scheme, self.names[role], self.passwords[role], self.vhost)


@pytest.fixture
def guide_users(cluster, rabbit_url):
    """The guide's users on a vhost of their own, for ``cluster``'s
    topic; deleted (daemons stopped first) after the test."""
    if shutil.which('rabbitmqctl') is None:
        pytest.skip('rabbitmqctl not available to create users')
    users = BrokerUsers(cluster.topic)
    try:
        users.create()
        yield users
    finally:
        # The daemons log in as these users: they stop first.
        daemons.stop_daemons_first()
        users.delete()
