"""The seeds' two workflows, step by step as their authors did them.

1. "Customizing the OpenStack Compute (nova) Scheduler": write a driver
   class (tests/unit/fixtures/out_of_tree/ip_scheduler.py), name it in
   ``[scheduler] driver``, restart, boot, read "Request from X scheduled
   to Y" in the log.
2. The Trove filter blog: write a filter class
   (tests/unit/fixtures/out_of_tree/trove_filter.py), make it available
   next to the in-tree filters, enable it by class name, and watch
   Trove images land on the Trove aggregate's hosts only.
"""

import itertools
import logging
import random

import oslo_messaging
import pytest

from scheduler import context
from scheduler import exception
from scheduler import manager as manager_mod
from scheduler.objects import base as objects_base
from tests.unit import fixtures

IP_SCHEDULER = 'tests.unit.fixtures.out_of_tree.ip_scheduler.IPScheduler'
TROVE_FILTER = 'tests.unit.fixtures.out_of_tree.trove_filter.TroveImageFilter'


def call(method, ctxt, **kwargs):
    try:
        return method(ctxt, **kwargs)
    except oslo_messaging.ExpectedException as wrapped:
        raise wrapped.exc_info[1]


def _from(address):
    return context.RequestContext(remote_address=address, user_id='demo',
                                  project_id='demo')


def _feed(manager, *names):
    for name in names:
        call(manager.update_service_capabilities,
             context.get_admin_context(), host_state=fixtures.report(name))


# --- 1. the IP scheduler driver ----------------------------------------------

def test_an_out_of_tree_driver_named_in_the_config_places(conf, caplog):
    conf.config(driver=IP_SCHEDULER, group='scheduler')
    manager = manager_mod.SchedulerManager()
    assert type(manager.driver).__module__ == \
        'tests.unit.fixtures.out_of_tree.ip_scheduler'
    _feed(manager, 'doc-1', 'doc-2', 'ops-1', 'devstack-havana')

    caplog.set_level(logging.DEBUG, logger='tests.unit.fixtures')
    random.seed(9)
    doc = {call(manager.select_destinations, _from('10.1.0.5'),
                spec_obj=fixtures.request())[0]['host'] for _ in range(10)}
    assert doc == {'doc-1', 'doc-2'}
    # The seed's driver returns one legacy destination per instance.
    assert call(manager.select_destinations, _from('10.2.7.7'),
                request_spec={'num_instances': 2,
                              'instance_type': {'memory_mb': 64}},
                filter_properties={}) == [
        {'host': 'ops-1', 'nodename': 'ops-1', 'limits': {}},
        {'host': 'ops-1', 'nodename': 'ops-1', 'limits': {}}]
    assert call(manager.select_destinations, _from('192.0.2.1'),
                spec_obj=fixtures.request())[0]['host'] == 'devstack-havana'
    # The line the seed tells us to look for in the n-sch screen.
    assert 'Request from 192.0.2.1 scheduled to devstack-havana' in \
        caplog.text


def test_the_out_of_tree_driver_takes_a_request_without_address(conf):
    """A caller on the host itself sends no source address."""
    conf.config(driver=IP_SCHEDULER, group='scheduler')
    manager = manager_mod.SchedulerManager()
    _feed(manager, 'doc-1', 'dev-1')
    assert call(manager.select_destinations, _from(None),
                spec_obj=fixtures.request())[0]['host'] == 'dev-1'


def test_the_out_of_tree_driver_finds_no_host(conf):
    conf.config(driver=IP_SCHEDULER, group='scheduler')
    manager = manager_mod.SchedulerManager()
    with pytest.raises(exception.NoValidHost) as info:
        call(manager.select_destinations, _from('10.1.0.5'),
             spec_obj=fixtures.request())
    assert 'Is the appropriate service running?' in str(info.value)
    _feed(manager, 'dev-1')
    with pytest.raises(exception.NoValidHost) as info:
        call(manager.select_destinations, _from('10.1.0.5'),
             spec_obj=fixtures.request())
    assert 'Could not find another compute' in str(info.value)


def test_the_out_of_tree_driver_runs_instances(conf):
    conf.config(driver=IP_SCHEDULER, group='scheduler')
    manager = manager_mod.SchedulerManager()
    _feed(manager, 'ops-1')
    casts = []

    class Compute:
        def run_instance(self, context, host, node, instance_uuid, spec_obj,
                         limits=None):
            casts.append((host, instance_uuid))

    manager.driver.compute_rpcapi = Compute()
    call(manager.schedule_run_instance, _from('10.2.0.9'),
         spec_obj=fixtures.request(num_instances=2),
         instance_uuids=[fixtures.uuid(1), fixtures.uuid(2)])
    assert casts == [('ops-1', fixtures.uuid(1)), ('ops-1', fixtures.uuid(2))]


def test_a_misspelt_driver_path_stops_the_service(conf):
    conf.config(driver='nova.scheduler.ip_scheduler.IPScheduler',
                group='scheduler')
    with pytest.raises(exception.SchedulerDriverNotFound) as info:
        manager_mod.SchedulerManager()
    assert 'nova.scheduler.ip_scheduler.IPScheduler' in str(info.value)


# --- 2. the Trove image filter -----------------------------------------------

@pytest.fixture
def trove_cloud(inventory, conf):
    """The blog's setup: compute3 in the 'Trove' aggregate, 1 and 2 not."""
    inventory.aggregate_create('Trove', metadata={'CPU': 'Trove'})
    inventory.aggregate_host_add('Trove', 'compute3')
    inventory.aggregate_create('M4')
    inventory.aggregate_host_add('M4', 'compute1')
    conf.config(available_filters=['scheduler.filters.all_filters',
                                   TROVE_FILTER],
                enabled_filters=['ComputeFilter', 'RamFilter',
                                 'TroveImageFilter'],
                weight_classes=['RAMWeigher'], group='filter_scheduler')
    manager = manager_mod.SchedulerManager()
    manager.driver.host_manager.load_from_inventory()
    _feed(manager, 'compute1', 'compute2', 'compute3')
    return manager


_BOOTED = itertools.count(100)


def _boot(manager, image_properties, n):
    uuids = [fixtures.uuid(next(_BOOTED)) for _ in range(n)]
    selections = call(manager.select_destinations,
                      context.get_admin_context(),
                      spec_obj=fixtures.request(
                          memory_mb=512, num_instances=n,
                          image_properties=image_properties),
                      instance_uuids=uuids, return_objects=True,
                      peer_manifest=objects_base.obj_manifest())
    return [alts[0].service_host for alts in selections]


def test_trove_images_go_to_trove_hosts_and_others_elsewhere(
        trove_cloud, caplog):
    caplog.set_level(logging.DEBUG, logger='tests.unit.fixtures')
    # "Launch 3 images with the tagged images, note they all go to compute3."
    assert _boot(trove_cloud, {'tesora_edition': 'enterprise'}, 3) == \
        ['compute3'] * 3
    # "Launch 3 images with the un-tagged images, note they all go to
    # compute1,2"
    assert set(_boot(trove_cloud, {'os_distro': 'cirros'}, 3)) == \
        {'compute1', 'compute2'}
    assert 'is a trove node' in caplog.text
    assert 'is NOT a trove node' in caplog.text


def test_the_trove_filter_reads_legacy_requests_too(trove_cloud):
    dests = call(trove_cloud.select_destinations,
                 context.get_admin_context(),
                 request_spec={
                     'num_instances': 1,
                     'instance_type': {'memory_mb': 512, 'vcpus': 1},
                     'image': {'properties': {'tesora_edition': '1'}}},
                 filter_properties={})
    assert [d['host'] for d in dests] == ['compute3']


def test_a_trove_image_with_no_trove_host_up(trove_cloud):
    trove_cloud.driver.host_manager.get_host_state('compute3').disabled = \
        True
    with pytest.raises(exception.NoValidHost):
        _boot(trove_cloud, {'tesora_edition': 'enterprise'}, 1)


def test_enabled_but_not_available_is_named(conf):
    # "do this wrong and the scheduler will error out saying it can't
    # find your scheduler"
    conf.config(available_filters=['scheduler.filters.all_filters'],
                enabled_filters=['ComputeFilter', 'TroveImageFilter'],
                group='filter_scheduler')
    with pytest.raises(exception.SchedulerHostFilterNotFound) as info:
        manager_mod.SchedulerManager()
    assert 'TroveImageFilter' in str(info.value)


def test_the_class_path_in_enabled_filters_is_the_other_mistake(conf):
    conf.config(available_filters=['scheduler.filters.all_filters',
                                   TROVE_FILTER],
                enabled_filters=['ComputeFilter', TROVE_FILTER],
                group='filter_scheduler')
    with pytest.raises(exception.SchedulerHostFilterNotFound) as info:
        manager_mod.SchedulerManager()
    assert TROVE_FILTER in str(info.value)
