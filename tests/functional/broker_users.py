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

#: Each row of the guide's credential table (its first cell, up to a
#: colon) and the tests of tests/functional/test_security.py that try
#: what the row says that credential can and cannot do, with these
#: users.  tests/unit/test_trust_doc.py checks that every row of the
#: table is here and every test named exists.
TABLE_TESTS = {
    'operator': (
        # admin answers, a forced host, aggregate casts, confirming an
        # instance of any host
        'test_default_install_keeps_callers_to_requests',
        # reports, sync and deletion for any host
        'test_compute_credentials_speak_only_for_their_hosts',
    ),
    'conductor (caller)': (
        # requests and a build served; legacy casts, admin answers and
        # a forced host refused by the service; 1.4 casts by the broker
        'test_default_install_keeps_callers_to_requests',
        'test_broker_permissions_keep_each_party_to_its_casts',
        # not a compute on the request topic, even for its own name
        'test_compute_credentials_speak_only_for_their_hosts',
    ),
    'compute': (
        # its own host: report, confirm, sync, delete; anything about
        # another host, another user's user_id, none, operator casts and
        # calls refused
        'test_compute_credentials_speak_only_for_their_hosts',
        'test_broker_permissions_keep_each_party_to_its_casts',
    ),
    'service (the scheduler daemon)': (
        # serves the three topics; casts run_instance with its own
        # user_id; its own credential is an operator's
        'test_default_install_keeps_callers_to_requests',
        'test_compute_credentials_speak_only_for_their_hosts',
    ),
}


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
                      'exchange': daemons.CONTROL_EXCHANGE or 'scheduler'}
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
