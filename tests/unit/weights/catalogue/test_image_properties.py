"""ImagePropertiesWeigher: instances of like images pack (or spread)."""

from scheduler import weights
from scheduler.weights import image_properties as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import contributions
from tests.unit.weights.catalogue import ranking

IMAGE = {'os_distro': 'windows', 'hw_machine_type': 'q35'}


def _hosts():
    return [
        host('none'),
        host('two-windows', instance_image_properties={
            'os_distro=windows': 2, 'os_distro=linux': 5}),
        host('one-each', instance_image_properties={
            'os_distro=windows': 1, 'hw_machine_type=q35': 1}),
    ]


def _raw(hosts, spec):
    weighed = [weights.WeighedHost(h) for h in hosts]
    return dict(zip((h.host for h in hosts),
                    mod.ImagePropertiesWeigher().weigh_objects(weighed,
                                                               spec)))


def test_off_by_default():
    # nova: multiplier 0.0 disables the weigher.
    assert set(_raw(_hosts(), request(image_properties=IMAGE)).values()) \
        == {0.0}


def test_counts_instances_sharing_each_requested_property(conf):
    conf.config(image_props_weight_multiplier=1.0,
                group='filter_scheduler')
    spec = request(image_properties=IMAGE)
    # nova: for each property of the requested image, the number of the
    # host's instances with the same value; other values do not count.
    assert _raw(_hosts(), spec) == {'none': 0.0, 'two-windows': 2.0,
                                    'one-each': 2.0}
    assert ranking(mod.ImagePropertiesWeigher(), _hosts(),
                   spec)[-1] == 'none'


def test_negative_multiplier_spreads(conf):
    conf.config(image_props_weight_multiplier=-1.0,
                group='filter_scheduler')
    spec = request(image_properties={'os_distro': 'windows'})
    assert ranking(mod.ImagePropertiesWeigher(), _hosts(), spec) == [
        'none', 'one-each', 'two-windows']


def test_weight_setting_ratios_and_unlisted_properties(conf):
    conf.config(image_props_weight_multiplier=1.0,
                image_props_weight_setting=['os_distro=1',
                                            'hw_machine_type=-1', 'bogus'],
                group='filter_scheduler')
    spec = request(image_properties=IMAGE)
    # one-each: 1 x 1 + 1 x -1; two-windows: 2 x 1.
    assert _raw(_hosts(), spec) == {'none': 0.0, 'two-windows': 2.0,
                                    'one-each': 0.0}
    conf.config(image_props_weight_setting=['hw_machine_type=3'],
                group='filter_scheduler')
    assert _raw(_hosts(), spec) == {'none': 0.0, 'two-windows': 0.0,
                                    'one-each': 3.0}


def test_no_image_weighs_nothing(conf):
    conf.config(image_props_weight_multiplier=1.0,
                group='filter_scheduler')
    assert set(_raw(_hosts(), request()).values()) == {0.0}


def test_aggregate_override(conf):
    conf.config(image_props_weight_multiplier=1.0,
                group='filter_scheduler')
    hosts = _hosts()
    hosts[1] = host('two-windows', instance_image_properties={
        'os_distro=windows': 2}, aggregates=[
            aggregate(image_props_weight_multiplier='0.5')])
    scores = contributions(mod.ImagePropertiesWeigher(), hosts,
                           request(image_properties={'os_distro':
                                                     'windows'}))
    assert scores['two-windows'] == 0.5
