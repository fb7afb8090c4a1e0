"""Each private name of a library the scheduler still relies on, with
a test that fails when a new release of that library moves it.

The places (and why no public API does) are in each module's own
docstring; the others are tested where they are used:
``trust.RAW_MESSAGE_ATTRIBUTE`` and ``trust.FAKE_DRIVER_MODULE`` in
test_trust.py, ``amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MAX`` in
test_rpc.py, oslo.versionedobjects' ``_changed_fields`` in
objects/test_objects.py.
"""

import inspect

import oslo_messaging
from oslo_messaging._drivers import amqpdriver
from oslo_messaging._drivers import base as om_drivers
from oslo_messaging._drivers import impl_rabbit
from oslo_messaging import server as om_server
from oslo_versionedobjects import base as ovo_base

from scheduler import objects
from scheduler import rejections
from scheduler import rpc


def test_the_rpc_server_builds_its_executor_from_executor_cls(fake_transport):
    # rpc.bound_intake replaces the class oslo.messaging's server keeps
    # and builds its executor from at start.
    assert 'self._executor_cls(' in inspect.getsource(
        om_server.MessageHandlingServer)
    server = rpc.get_server(
        oslo_messaging.Target(topic='privates', server='h1'), [],
        transport=fake_transport)
    assert getattr(server._executor_cls, 'bounded', False)


def test_the_amqp_driver_opens_its_reply_queue_in_get_reply_q(
        fake_transport):
    # rpc._reply_queue_open reads transport._driver._get_reply_q.
    assert isinstance(fake_transport._driver,
                      om_drivers.BaseDriver)
    assert issubclass(impl_rabbit.RabbitDriver, amqpdriver.AMQPDriverBase)
    opener = amqpdriver.AMQPDriverBase._get_reply_q
    assert list(inspect.signature(opener).parameters) == ['self']


def test_the_records_rejections_takes_are_still_logged_there():
    modules = {'oslo.messaging._drivers.impl_rabbit': impl_rabbit,
               'oslo_messaging._drivers.amqpdriver': amqpdriver}
    for logger, start in rejections.DroppedMessageFilter.RECORDS:
        module = modules[logger]
        assert module.LOG.name == logger
        assert start in inspect.getsource(module)


def test_versioned_objects_keep_field_values_under_obj_():
    # SchedulerObject.from_coerced stores a value under the name
    # oslo's setter gives it.
    assert ovo_base._get_attrname('nodename') == '_obj_nodename'
    sel = objects.Selection(nodename='h1')
    assert sel.__dict__['_obj_nodename'] == 'h1'


def test_from_coerced_is_the_constructor_for_coerced_values():
    # SchedulerObject.from_coerced stores values where oslo's setter
    # does, and marks them changed where it does.
    sel = objects.Selection(
        service_host='h1', nodename='n1', weight=1.5,
        compute_node_uuid='5d1f8a6e-8f4b-4c2e-9a53-0c6f1f7e2b10',
        limits=objects.SchedulerLimits(vcpu=8))
    values = {name: getattr(sel, name) for name in sel.fields
              if sel.obj_attr_is_set(name)}
    copy = objects.Selection.from_coerced(values)
    assert copy.obj_what_changed() == sel.obj_what_changed()
    data = 'versioned_object.data'
    assert copy.obj_to_primitive()[data] == sel.obj_to_primitive()[data]
    assert {name: getattr(copy, name) for name in values} == values
