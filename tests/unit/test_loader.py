"""scheduler.loader: one way to find drivers, filters and weighers.

A name is an entry point of the namespace (setup.cfg) or a dotted class
path; ``scheduler.filters.all_filters`` stands for every filter.
"""

import logging

import pytest

from scheduler.drivers import chance
from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import filters
from scheduler.filters import ram
from scheduler import loader
from scheduler.weights import cpu

IN_TREE_FILTERS = {'AllHostsFilter', 'AvailabilityZoneFilter',
                   'ComputeCapabilitiesFilter', 'ComputeFilter',
                   'DiskFilter', 'ImagePropertiesFilter', 'RamFilter',
                   'VCPUFilter'}


def test_entry_point_by_name():
    assert loader.load_class(loader.FILTER_NAMESPACE, 'RamFilter') \
        is ram.RamFilter
    assert loader.load_class(loader.DRIVER_NAMESPACE, 'filter_scheduler') \
        is filter_scheduler.FilterScheduler
    assert loader.load_class(loader.DRIVER_NAMESPACE, 'chance_scheduler') \
        is chance.ChanceScheduler
    assert loader.load_class(loader.WEIGHER_NAMESPACE, 'CPUWeigher') \
        is cpu.CPUWeigher


def test_dotted_class_path():
    assert loader.load_class(loader.FILTER_NAMESPACE,
                             'scheduler.filters.ram.RamFilter') \
        is ram.RamFilter
    # Out-of-tree code needs no entry point: its class path is enough.
    cls = loader.load_class(
        loader.FILTER_NAMESPACE,
        'tests.unit.fixtures.out_of_tree.trove_filter.TroveImageFilter')
    assert cls.__name__ == 'TroveImageFilter'


def test_all_filters_marker_gives_every_in_tree_filter():
    classes = loader.load_classes(loader.FILTER_NAMESPACE,
                                  ['scheduler.filters.all_filters'],
                                  'scheduler.filters.all_filters')
    assert IN_TREE_FILTERS <= {cls.__name__ for cls in classes}
    assert {cls.__name__ for cls in filters.all_filters()} == \
        {cls.__name__ for cls in classes}


def test_order_is_kept_and_duplicates_dropped():
    classes = loader.load_classes(
        loader.FILTER_NAMESPACE,
        ['RamFilter', ' scheduler.filters.ram.RamFilter ', '', 'DiskFilter',
         'scheduler.filters.all_filters'],
        'scheduler.filters.all_filters')
    names = [cls.__name__ for cls in classes]
    assert names[:2] == ['RamFilter', 'DiskFilter']
    assert len(names) == len(set(names))


def test_unknown_name_raises_plugin_load_error():
    with pytest.raises(exception.PluginLoadError) as info:
        loader.load_class(loader.FILTER_NAMESPACE, 'NoSuchFilter')
    message = str(info.value)
    assert 'NoSuchFilter' in message
    assert 'scheduler.filters' in message
    assert 'no entry point' in message


def test_unknown_dotted_path_says_it_is_not_importable():
    with pytest.raises(exception.PluginLoadError) as info:
        loader.load_class(loader.DRIVER_NAMESPACE, 'nowhere.mod.Scheduler')
    assert info.value.kwargs['name'] == 'nowhere.mod.Scheduler'
    assert 'not importable' in str(info.value)


def test_unknown_name_in_a_list_fails_the_whole_list():
    with pytest.raises(exception.PluginLoadError):
        loader.load_classes(loader.WEIGHER_NAMESPACE,
                            ['RAMWeigher', 'NoSuchWeigher'],
                            'scheduler.weights.all_weighers')


def test_all_classes_of_each_namespace():
    drivers = {cls.__name__ for cls in
               loader.all_classes(loader.DRIVER_NAMESPACE)}
    assert {'FilterScheduler', 'ChanceScheduler', 'IPScheduler'} <= drivers
    weighers = {cls.__name__ for cls in
                loader.all_classes(loader.WEIGHER_NAMESPACE)}
    assert {'RAMWeigher', 'CPUWeigher', 'DiskWeigher'} <= weighers


def test_a_dotted_path_that_imports_logs_nothing(caplog):
    # The guides promise no "could not load" warning for a class path.
    caplog.set_level('DEBUG')
    loader.load_class(loader.FILTER_NAMESPACE,
                      'scheduler.filters.ram.RamFilter')
    assert [r for r in caplog.records if r.levelname != 'DEBUG'] == []


@pytest.mark.parametrize('name', ['NoSuchWeigher', 'no.such.module.Weigher'])
def test_an_unknown_name_is_said_once_by_the_caller(name, caplog):
    # The start-up error names it; stevedore's own "Could not load"
    # warning would be a second line about the same mistake.
    caplog.set_level('DEBUG')
    with pytest.raises(exception.PluginLoadError) as info:
        loader.load_class(loader.WEIGHER_NAMESPACE, name)
    assert 'no entry point (NoMatches)' in str(info.value)
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []
