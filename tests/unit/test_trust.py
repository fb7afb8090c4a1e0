"""scheduler.trust: who sent a message and what that credential may do.

The end-to-end proof (two broker users on a private vhost) is in
tests/functional/test_security.py; here the rules, and the library
internals the module relies on, so that a new oslo.messaging or kombu
that changes them fails here first.
"""

import inspect
import json
import logging

import hypothesis
import kombu
import kombu.message
import kombu.messaging
import oslo_messaging
from oslo_messaging._drivers import amqpdriver
from oslo_messaging._drivers import impl_rabbit
import pytest

from scheduler import context
from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import manager as manager_mod
from scheduler import objects
from scheduler import trust
from tests.unit import fixtures


def ctx(sender, admin=False):
    c = context.RequestContext(user_id='u', project_id='p', is_admin=admin)
    c.sender = sender
    return c


@pytest.fixture
def amqp(conf):
    """The service logs in as ``sched`` (an operator credential)."""
    conf.config(transport_url='rabbit://sched:pw@127.0.0.1:5672/v')


# -- the library internals this module touches -------------------------------

def test_oslo_messaging_publishes_through_kombu_producer_publish():
    """``stamp_published_messages`` wraps kombu's Producer.publish; the
    rabbit driver must still build a kombu Producer and publish with it
    (and leave ``user_id`` to us)."""
    source = inspect.getsource(impl_rabbit.Connection)
    assert 'kombu.messaging.Producer(' in source
    assert 'self._producer.publish(' in source
    assert 'user_id' not in inspect.getsource(impl_rabbit.Connection._publish)
    assert 'properties' in inspect.signature(
        kombu.messaging.Producer.publish).parameters


def test_the_rabbit_message_keeps_the_kombu_message():
    """``sender_of`` reads ``incoming.message._raw_message.properties``."""
    body = json.dumps({'oslo.version': '2.0', 'oslo.message': json.dumps(
        {'method': 'm', 'args': {}})})
    raw = kombu.message.Message(body=body, content_type='application/json',
                                content_encoding='utf-8',
                                properties={'user_id': 'compute-7'})
    message = impl_rabbit.RabbitMessage(raw)
    assert getattr(message, trust.RAW_MESSAGE_ATTRIBUTE) is raw
    incoming = amqpdriver.AMQPIncomingMessage(
        None, {'is_admin': True}, message, 'u', None, None, None, None, None)
    assert trust.sender_of(incoming) == 'compute-7'
    trust.note_sender(incoming)
    assert trust.take_sender(incoming.ctxt) == 'compute-7'
    assert trust.SENDER_KEY not in incoming.ctxt
    # No user_id: no known sender (never the service's own).
    raw.properties = {}
    assert trust.sender_of(incoming) is None


def test_the_fake_driver_is_the_local_process(fake_transport):
    from oslo_messaging._drivers import impl_fake
    assert impl_fake.__name__ == trust.FAKE_DRIVER_MODULE
    incoming = impl_fake.FakeIncomingMessage({}, {'method': 'm'}, None,
                                             None)
    assert trust.sender_of(incoming) == trust.LOCAL
    # An unknown driver's message: unknown sender (fails closed).
    assert trust.sender_of(object()) is None


def test_every_publish_names_its_login():
    trust.stamp_published_messages()
    trust.stamp_published_messages()  # once only
    assert kombu.messaging.Producer.publish.stamps_user_id
    with kombu.Connection('memory://', userid='alice') as conn:
        queue = conn.SimpleQueue('trust-test')
        try:
            producer = kombu.messaging.Producer(conn.default_channel)
            producer.publish({'a': 1}, routing_key='trust-test')
            producer.publish({'a': 2}, routing_key='trust-test',
                             user_id='explicit')
            first = queue.get(timeout=1)
            second = queue.get(timeout=1)
        finally:
            queue.close()
    assert first.properties['user_id'] == 'alice'
    assert second.properties['user_id'] == 'explicit'


def test_a_context_off_the_wire_never_carries_its_own_sender():
    from scheduler import rpc
    values = context.RequestContext(user_id='x').to_dict()
    assert 'sender' not in values and trust.SENDER_KEY not in values
    values[trust.SENDER_KEY] = 'forged'  # what a message may claim ...
    values.pop(trust.SENDER_KEY)  # ... is overwritten by note_sender
    made = rpc.ServerSerializer().deserialize_context(values)
    assert made.sender is None
    assert context.RequestContext().sender == trust.LOCAL
    assert ctx('someone').elevated().sender == 'someone'


# -- the rules ----------------------------------------------------------------

def test_operators_are_the_service_user_and_admin_users(amqp, conf):
    assert trust.operator_users() == {'sched'}
    conf.config(admin_users=['ops'], group='trust')
    assert trust.operator_users() == {'sched', 'ops'}
    assert trust.is_admin(ctx('ops', admin=True))
    assert trust.is_admin(ctx(trust.LOCAL, admin=True))
    assert not trust.is_admin(ctx('ops', admin=False))
    # is_admin is what the sender wrote: from anyone else it is ignored.
    assert not trust.is_admin(ctx('conductor', admin=True))
    assert not trust.is_admin(ctx(None, admin=True))


def test_is_operator_asks_operator_users(amqp, conf):
    """One rule: whoever ``operator_users`` lists is an operator, and no
    one else (but the process itself), whatever the configuration."""
    senders = ['sched', 'ops', 'guest', 'conductor', '', None, trust.LOCAL]
    for url, admins in [('rabbit://sched:pw@127.0.0.1:5672/v', []),
                        ('rabbit://sched:pw@127.0.0.1:5672/v', ['ops']),
                        ('rabbit://127.0.0.1:5672/', ['ops', 'sched']),
                        ('fake://', ['guest'])]:
        conf.config(transport_url=url)
        conf.config(admin_users=admins, group='trust')
        users = trust.operator_users()
        # Made once per configuration, not for every message.
        assert trust.operator_users() is users
        for who in senders:
            assert trust.is_operator(ctx(who)) == (
                who == trust.LOCAL or who in users), (url, admins, who)


def test_compute_users_bind_credentials_to_hosts(amqp, conf):
    conf.config(compute_users={'rack7': 'rack7-*|spare-3', '*': '{user}'},
                group='trust')
    assert trust.owns('rack7', 'rack7-001')
    assert trust.owns('rack7', 'RACK7-002')
    assert trust.owns('rack7', 'spare-3')
    assert not trust.owns('rack7', 'rack8-001')
    assert trust.owns('compute-9', 'compute-9')
    assert not trust.owns('compute-9', 'compute-10')
    assert not trust.owns(None, 'compute-9')
    assert not trust.owns(trust.LOCAL, 'x')
    for channel in (trust.REPORTS_TOPIC, trust.REQUEST_TOPIC):
        assert trust.may_speak_for(ctx('rack7'), 'rack7-1', channel)
        assert not trust.may_speak_for(ctx('rack7'), 'other', channel)
        assert not trust.may_speak_for(ctx(None), 'x', channel)
        assert trust.may_speak_for(ctx('sched'), 'anything', channel)
    # On the request topic, where callers publish too, '*' does not
    # count: a caller's user would speak for a host named like it.
    assert trust.may_speak_for(ctx('conductor'), 'conductor',
                               trust.REPORTS_TOPIC)
    assert not trust.may_speak_for(ctx('conductor'), 'conductor',
                                   trust.REQUEST_TOPIC)


def test_a_user_name_is_never_a_pattern(amqp, conf):
    """``{user}`` stands for the broker user's name as it is: a user
    named with pattern characters owns only the host of that name."""
    conf.config(compute_users={'*': '{user}|{user}-spare'}, group='trust')
    for user, other in (('c*', 'c-007'), ('rack[0-9]', 'rack1'),
                        ('node?', 'node1'), ('*', 'any-host')):
        assert not trust.owns(user, other), user
        assert not trust.owns(user, other + '-spare'), user
    assert trust.owns('compute-1', 'compute-1')
    assert trust.owns('compute-1', 'COMPUTE-1-spare')


def test_without_binding_only_the_reports_topic_is_open(amqp):
    assert not trust.CONF.trust.compute_users
    assert trust.may_speak_for(ctx('nova'), 'h', trust.REPORTS_TOPIC)
    assert not trust.may_speak_for(ctx('nova'), 'h', trust.REQUEST_TOPIC)
    assert not trust.may_speak_for(ctx(None), 'h', trust.REQUEST_TOPIC)
    assert trust.may_speak_for(ctx('sched'), 'h', trust.REQUEST_TOPIC)


def test_the_upgrade_window_takes_unstamped_casts_on_the_request_topic(
        amqp, conf):
    # An older release's compute stamps no login and reports on the
    # request topic: refused, unless the operator opens the window.
    assert not trust.may_speak_for(ctx(None), 'h', trust.REQUEST_TOPIC)
    conf.config(accept_unstamped_legacy_casts=True, group='trust')
    assert trust.may_speak_for(ctx(None), 'h', trust.REQUEST_TOPIC)
    # A stamped caller's login is still no compute's.
    assert not trust.may_speak_for(ctx('nova'), 'h', trust.REQUEST_TOPIC)


def test_only_admins_of_operator_credentials_force_hosts(amqp):
    spec = fixtures.request(force_hosts=['small'])
    for who, admin in (('conductor', True), ('sched', False), (None, True)):
        with pytest.raises(exception.NotAuthorized) as err:
            trust.check_forced_hosts(ctx(who, admin), spec)
        assert 'force_hosts' in str(err.value)
    trust.check_forced_hosts(ctx('sched', True), spec)
    with pytest.raises(exception.NotAuthorized):
        trust.check_forced_hosts(ctx('conductor', True),
                                 fixtures.request(force_nodes=['n']))
    trust.check_forced_hosts(ctx('conductor'), fixtures.request())


@pytest.mark.parametrize('name', ['', 'x' * 300, 'a' * 64, '-lead', 'a b',
                                  '.'.join(['a' * 63] * 3 + ['b' * 62]),
                                  'a..b', 'host\n', 'h\u00e9te', 'probe-1.0',
                                  None, 5, ['h']])
def test_invalid_host_names_are_refused(name):
    with pytest.raises(exception.InvalidRequest) as err:
        trust.check_host_name(name)
    assert len(str(err.value)) < 300


@pytest.mark.parametrize('name', ['compute-001', 'c1.example.org',
                                  'under_score', '10.0.0.7', 'a' * 63,
                                  '.'.join(['a' * 63] * 3 + ['b' * 61])])
def test_valid_host_names_are_taken(name):
    assert trust.check_host_name(name) == name


@pytest.mark.parametrize('name', ['\u212aompute1', 'computes\u017f'])
def test_lookalikes_of_ascii_host_names_are_refused(name):
    """The Kelvin sign and the long s pass oslo.config's host name
    pattern (case-insensitive in Unicode): a second ``kompute1`` in
    ``hosts list``, which the owner of the real one could speak for too
    (``owns`` compares lower-cased names, and the Kelvin sign lower-cases
    to an ASCII "k")."""
    with pytest.raises(exception.InvalidRequest):
        trust.check_host_name(name)


def test_node_names():
    assert trust.check_node_name('9c3e1b5e-7f0e-4c55-8a8f-0d2a1c2b3e4f')
    for bad in ('', 'n' * 256, 'a\x00b', None):
        with pytest.raises(exception.InvalidRequest):
            trust.check_node_name(bad)


# -- the endpoints ------------------------------------------------------------

def _manager():
    driver = filter_scheduler.FilterScheduler(fixtures.manager_with([
        fixtures.report('small', memory_mb=2048)]))
    return manager_mod.SchedulerManager(driver=driver)


def _known(manager) -> set:
    return {s.host for s in manager.driver.host_manager.get_all_host_states()}


def test_reports_are_taken_only_from_their_hosts_credential(amqp, conf,
                                                            caplog):
    conf.config(compute_users={'c-a': 'a-*'}, group='trust')
    manager = _manager()
    reports = manager.reports
    with caplog.at_level(logging.WARNING):
        reports.update_service_capabilities(ctx('c-a'), objects.HostState(
            host='b-1', nodename='b-1', memory_mb=1024, vcpus=1,
            local_gb=10))
        reports.update_service_capabilities(ctx(None), objects.HostState(
            host='a-2', nodename='a-2', memory_mb=1024, vcpus=1,
            local_gb=10))
        for bad in ('', 'x' * 300):
            reports.update_service_capabilities(ctx('sched'),
                                                objects.HostState(
                host=bad, nodename='n', memory_mb=1024, vcpus=1,
                local_gb=10))
    assert _known(manager) == {'small'}
    text = caplog.text
    assert 'host b-1 on the reports topic refused for broker user c-a' \
        in text
    assert 'broker user unknown (no user_id)' in text
    assert "host name '' is not a valid host name" in text
    assert 'is not a valid host name' in text and 'x' * 60 not in text
    reports.update_service_capabilities(ctx('c-a'), objects.HostState(
        host='a-1', nodename='a-1', memory_mb=1024, vcpus=1, local_gb=10))
    assert _known(manager) == {'small', 'a-1'}


def test_legacy_casts_on_the_request_topic_need_a_credential(amqp):
    """accept_legacy_casts = true (the default): a caller's casts on the
    request topic change nothing, admin context or not."""
    manager = _manager()
    conductor = ctx('conductor', admin=True)
    manager.update_service_capabilities(conductor, objects.HostState(
        host='ghost', nodename='ghost', memory_mb=10 ** 6, vcpus=100,
        local_gb=10 ** 4))
    manager.update_aggregates(conductor, [objects.Aggregate(
        name='evil', hosts=['small'],
        metadata={'ram_allocation_ratio': '100'})])
    assert _known(manager) == {'small'}
    assert 'evil' not in {a.name
                          for a in manager.driver.host_manager.aggregates()}
    # The service's own credential (a 1.3-capped tool) is served.
    manager.update_service_capabilities(ctx('sched', admin=True),
                                        objects.HostState(
        host='legacy', nodename='legacy', memory_mb=1024, vcpus=1,
        local_gb=10))
    assert _known(manager) == {'small', 'legacy'}


def test_explain_and_no_valid_host_details_need_an_operator(amqp):
    manager = _manager()
    spec = fixtures.request(memory_mb=10 ** 6)
    for who, detailed in (('conductor', False), ('sched', True)):
        result = manager.explain(ctx(who, admin=True), spec_obj=spec)
        assert bool(result['rejected']) is detailed, who
        with pytest.raises(oslo_messaging.ExpectedException) as err:
            manager.select_destinations(ctx(who, admin=True), spec_obj=spec,
                                        return_objects=True)
        reason = str(err.value.exc_info[1])
        assert ('Filter results' in reason) is detailed, who


@hypothesis.settings(max_examples=3000, deadline=None)
@hypothesis.given(hypothesis.strategies.text(
    alphabet='ab09_-.Z', min_size=0, max_size=70))
def test_the_fast_host_name_check_accepts_only_what_oslo_accepts(name):
    """``check_host_name`` skips oslo.config's type for names its own
    pattern accepts: it must never accept one the type refuses."""
    from oslo_config import types
    if trust._PLAIN_HOST_NAME.match(name):
        types.HostDomain()(name)


# -- nova's rebuild check: forced by every user, held to the instance --------

REBUILD = {'_nova_check_type': ['rebuild']}


def _two_hosts_manager(**first):
    driver = filter_scheduler.FilterScheduler(fixtures.manager_with([
        fixtures.report('h1', memory_mb=4096, **first),
        fixtures.report('h2', memory_mb=4096)]))
    return manager_mod.SchedulerManager(driver=driver)


def _select(manager, who, spec, uuids):
    return [alts['host'] for alts in manager.select_destinations(
        ctx(who), spec_obj=spec, instance_uuids=uuids)]


def _claimed_mb(manager) -> dict:
    return {s.host: s.memory_mb_used
            for s in manager.driver.host_manager.get_all_host_states()}


def test_a_users_rebuild_forces_the_host_its_instance_is_on(amqp):
    """nova's compute API forces the instance's own host and node for
    every user's rebuild with a new image: a caller's credential and a
    user's context may send it for an instance where it is."""
    manager = _two_hosts_manager()
    x = fixtures.uuid(1)
    [host] = _select(manager, 'conductor', fixtures.request(memory_mb=3000),
                     [x])
    rebuild = fixtures.request(memory_mb=3000, force_hosts=[host.upper()],
                               force_nodes=[host], scheduler_hints=REBUILD)
    assert _select(manager, 'conductor', rebuild, [x]) == [host]
    assert _claimed_mb(manager)[host] == 3000


@pytest.mark.parametrize('case', ['unforced', 'other host', 'other node',
                                  'other flavor', 'unplaced', 'no uuid'])
def test_a_users_rebuild_check_is_held_to_its_instance(amqp, case):
    """The rebuild hint skips the resource filters: from a caller, it is
    taken only as nova sends it, or hosts take more than they have."""
    manager = _two_hosts_manager()
    x = fixtures.uuid(1)
    [host] = _select(manager, 'conductor', fixtures.request(memory_mb=3000),
                     [x])
    other = {'h1': 'h2', 'h2': 'h1'}[host]
    fields = dict(memory_mb=3000, force_hosts=[host], force_nodes=[host],
                  scheduler_hints=REBUILD)
    uuids = [x]
    if case == 'unforced':
        del fields['force_hosts'], fields['force_nodes']
        uuids = [fixtures.uuid(2)]
    elif case == 'other host':
        fields.update(force_hosts=[other], force_nodes=[other])
    elif case == 'other node':
        fields.update(force_nodes=[host.upper()])
    elif case == 'other flavor':
        fields.update(memory_mb=1)
    elif case == 'unplaced':
        uuids = [fixtures.uuid(2)]
    else:
        uuids = None
    before = _claimed_mb(manager)
    with pytest.raises(oslo_messaging.ExpectedException) as err:
        _select(manager, 'conductor', fixtures.request(**fields), uuids)
    error = err.value.exc_info[1]
    assert isinstance(error, exception.NotAuthorized)
    assert 'rebuild' in str(error)
    assert _claimed_mb(manager) == before
    # The operator may (an admin context from its credential): past
    # the trust check, the driver decides (another flavor for a claim
    # still pending is a second request with the same uuid: refused).
    try:
        manager.select_destinations(ctx('sched', admin=True),
                                    spec_obj=fixtures.request(**fields),
                                    instance_uuids=uuids)
    except oslo_messaging.ExpectedException as e:
        assert case == 'other flavor'
        assert isinstance(e.exc_info[1], exception.InstanceAlreadyPlaced)


def test_a_forged_rebuild_hint_no_longer_overcommits(amqp):
    """Before: the hint alone skipped RamFilter for any caller, and two
    4,096 MB hosts took 9,000 and 6,000 MB of new instances."""
    manager = _two_hosts_manager()
    for n in range(5):
        with pytest.raises(oslo_messaging.ExpectedException):
            _select(manager, 'conductor', fixtures.request(
                memory_mb=3000, scheduler_hints=REBUILD),
                [fixtures.uuid(10 + n)])
    assert _claimed_mb(manager) == {'h1': 0, 'h2': 0}


def test_a_rebuild_of_an_instance_only_its_host_reports(amqp):
    """An instance the inventory holds no claim for (placed before it
    knew of it) is where its host's last report lists it."""
    z = fixtures.uuid(3)
    manager = _two_hosts_manager(instance_uuids=[z], num_instances=1)
    rebuild = fixtures.request(force_hosts=['h1'], scheduler_hints=REBUILD)
    assert _select(manager, 'conductor', rebuild, [z]) == ['h1']
    with pytest.raises(oslo_messaging.ExpectedException):
        _select(manager, 'conductor', fixtures.request(
            force_hosts=['h2'], scheduler_hints=REBUILD), [z])


def test_a_speaker_judges_each_host_as_may_speak_for(amqp, conf):
    """``speaker`` (one message about many hosts) says what
    ``may_speak_for`` says of each host, with the configuration of when
    it is asked: a reload or an override is seen by the next message."""
    senders = ['sched', 'rack7', 'compute-9', 'conductor', None,
               trust.LOCAL]
    hosts = ['rack7-1', 'RACK7-2', 'compute-9', 'conductor', 'other']
    for table in ({}, {'rack7': 'rack7-*'}, {'*': '{user}'},
                  {'rack7': 'rack7-*', '*': '{user}'}):
        conf.config(compute_users=table, group='trust')
        for legacy in (False, True):
            conf.config(accept_unstamped_legacy_casts=legacy,
                        group='trust')
            for channel in (trust.REPORTS_TOPIC, trust.REQUEST_TOPIC):
                for who in senders:
                    speaks_for = trust.speaker(ctx(who), channel)
                    for host in hosts:
                        expected = (
                            who in ('sched', trust.LOCAL)
                            or (channel == trust.REQUEST_TOPIC
                                and who is None and legacy)
                            or (trust.owns(who, host, channel ==
                                           trust.REPORTS_TOPIC)
                                if table else
                                channel == trust.REPORTS_TOPIC))
                        assert speaks_for(host) == expected, (
                            table, legacy, channel, who, host)
                        assert trust.may_speak_for(
                            ctx(who), host, channel) == expected
