"""The worked examples of doc/authoring-guide.md, loaded as the guide says.

* ``doc/examples/trove_filter``: a module on the path, named by its
  dotted class path in ``available_filters``;
* ``doc/examples/acme_filters``: a package of its own, found by its
  entry points only (it is "installed" into a temporary directory with
  a ``*.dist-info`` built from its ``pyproject.toml``);
* ``doc/examples/dump_filter``: like the first, and read in the log.

Each runs through the real FilterScheduler over hosts built with the
shared fixtures.  The last test keeps the code shown in the guide equal
to these files.
"""

import logging
import os
import pathlib
import re
import shutil
import sys
import tomllib

from oslo_config import cfg
import pytest
import stevedore

from scheduler.drivers import filter_scheduler
from scheduler import exception
from scheduler import filters
from scheduler import loader
from scheduler import weights
from tests.unit import fixtures

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / 'doc' / 'examples'
GUIDE = REPO / 'doc' / 'authoring-guide.md'

TROVE_FILTER = 'trove_filter.TroveImageFilter'
DUMP_FILTER = 'dump_filter.DumpFilter'


@pytest.fixture
def on_path(monkeypatch):
    """``add(directory, *modules)``: import ``modules`` from ``directory``.

    What an operator does with PYTHONPATH (or pip install); sys.path and
    sys.modules are put back after the test.
    """
    loaded = []

    def add(directory, *modules):
        monkeypatch.syspath_prepend(str(directory))
        for name in modules:
            sys.modules.pop(name, None)
        loaded.extend(modules)

    yield add
    for name in loaded:
        sys.modules.pop(name, None)


def _scheduler(reports, aggregates=()):
    return filter_scheduler.FilterScheduler(
        fixtures.manager_with(reports, aggregates))


def _hosts(selections):
    return [alts[0].service_host for alts in selections]


# --- a. the Trove isolation filter -------------------------------------------

#: The blog's cloud: compute3 in the Trove aggregate, 1 and 2 not.  The
#: Trove host has the most RAM, so RAMWeigher picks it whenever it passes.
TROVE_FLEET = [fixtures.report('compute1', memory_mb=4096),
               fixtures.report('compute2', memory_mb=4096),
               fixtures.report('compute3', memory_mb=16384)]
#: Option 2 of the blog: trove=true on the Trove aggregate (and images).
TROVE_AGGREGATES = [
    fixtures.aggregate('Trove', ['compute3'], {'trove': 'true'}),
    fixtures.aggregate('General', ['compute1', 'compute2'],
                       {'trove': 'false'})]

TROVE_IMAGE = {'tesora_edition': 'enterprise', 'trove': 'true'}
CUSTOMER_IMAGE = {'os_distro': 'cirros'}


def _trove_scheduler(conf, *enabled):
    conf.config(available_filters=['scheduler.filters.all_filters',
                                   TROVE_FILTER],
                enabled_filters=['ComputeFilter', 'RamFilter'] + list(enabled),
                weight_classes=['RAMWeigher'], group='filter_scheduler')
    return _scheduler([r.obj_clone() for r in TROVE_FLEET], TROVE_AGGREGATES)


@pytest.fixture
def trove(on_path):
    on_path(EXAMPLES / 'trove_filter', 'trove_filter')


def test_trove_filter_loads_by_dotted_path(conf, trove):
    driver = _trove_scheduler(conf, 'TroveImageFilter')
    flt = driver.enabled_filters[-1]
    assert type(flt).__module__ == 'trove_filter'
    assert pathlib.Path(sys.modules['trove_filter'].__file__) == \
        EXAMPLES / 'trove_filter' / 'trove_filter.py'


def test_trove_images_only_on_trove_hosts(conf, trove):
    driver = _trove_scheduler(conf, 'TroveImageFilter')
    uuids = [fixtures.uuid(i) for i in range(1, 4)]
    assert _hosts(driver.select_destinations(
        None, fixtures.request(image_properties=TROVE_IMAGE,
                               num_instances=3), uuids)) == ['compute3'] * 3


def test_other_requests_never_on_trove_hosts(conf, trove):
    driver = _trove_scheduler(conf, 'TroveImageFilter')
    placed = _hosts(driver.select_destinations(
        None, fixtures.request(image_properties=CUSTOMER_IMAGE,
                               num_instances=4), None))
    assert set(placed) == {'compute1', 'compute2'}
    # Booted from a volume: no image, so not a Trove image either.
    placed = _hosts(driver.select_destinations(
        None, fixtures.request(is_bfv=True), None))
    assert placed != ['compute3']


def test_the_trap_trove_filter_avoids(conf, trove):
    """AggregateImagePropertiesIsolation lets untagged images in."""
    driver = _trove_scheduler(conf, 'AggregateImagePropertiesIsolation')
    # Tagged images are kept on the Trove host ...
    assert _hosts(driver.select_destinations(
        None, fixtures.request(image_properties=TROVE_IMAGE), None)) == \
        ['compute3']
    # ... but an image without the property passes every host, and the
    # roomy Trove host wins: a customer's instance lands on it.
    assert _hosts(driver.select_destinations(
        None, fixtures.request(image_properties=CUSTOMER_IMAGE), None)) == \
        ['compute3']


def test_trove_filter_explains_its_rejections(conf, trove):
    driver = _trove_scheduler(conf, 'TroveImageFilter')
    result = driver.explain(
        None, fixtures.request(image_properties=CUSTOMER_IMAGE))
    assert result['rejected'] == {'compute3/compute3': {
        'filter': 'TroveImageFilter',
        'reason': 'not a Trove image (no tesora_edition property) and the '
                  'host is in aggregate Trove'}}
    result = driver.explain(
        None, fixtures.request(image_properties=TROVE_IMAGE))
    assert result['rejected']['compute1/compute1']['reason'] == (
        'Trove image (tesora_edition property) and the host is not in '
        'aggregate Trove')


def test_trove_filter_runs_once_per_request(conf, trove):
    driver = _trove_scheduler(conf, 'TroveImageFilter')
    report = filters.FilterReport()
    driver.select_destinations(
        None, fixtures.request(image_properties=TROVE_IMAGE,
                               num_instances=3), None, report=report)
    names = [step.name for step in report.steps]
    assert names.count('TroveImageFilter') == 1
    assert names.count('RamFilter') == 3


# --- b. AcmeFilter, a package found by its entry points ----------------------

ACME = EXAMPLES / 'acme_filters'
ACME_MODULES = ('acme_filters', 'acme_filters.acme', 'acme_filters.weigher')


def _entry_points_txt(pyproject: pathlib.Path) -> tuple:
    """entry_points.txt as pip would write it from ``pyproject``, and the
    ``[project]`` table."""
    with open(pyproject, 'rb') as f:
        project = tomllib.load(f)['project']
    lines = []
    for group, entries in project['entry-points'].items():
        lines.append('[%s]' % group)
        lines.extend('%s = %s' % item for item in entries.items())
        lines.append('')
    return '\n'.join(lines), project


class EntryPoints:
    """stevedore's two entry point caches, private to one test.

    * On disk (~/.cache/python-entrypoints), keyed by a hash of sys.path
      and of the mtimes of its entries: a package added to sys.path
      changes the hash, so the next scan sees it.  stevedore skips the
      disk when the interpreter lives under /tmp; here it is on, in the
      test's directory, wherever the interpreter is.
    * In memory, ``ExtensionManager.ENTRY_POINT_CACHE``: per namespace
      only, for the life of the process.  A running scheduler does not
      see a plugin installed after it listed the namespace;
      ``restart()`` forgets it, as a restart does.
    """

    def __init__(self, directory, monkeypatch):
        self.directory = directory
        self._monkeypatch = monkeypatch
        cache_mod = getattr(stevedore, '_cache', None)
        #: Whether stevedore has the on-disk cache this fixture knows.
        self.disk = cache_mod is not None and hasattr(cache_mod, 'Cache')
        if self.disk:
            cache = cache_mod.Cache(cache_dir=str(directory))
            cache._disable_caching = False
            for name in ('get_group_all', 'get_group_named', 'get_single'):
                monkeypatch.setattr(cache_mod, name, getattr(cache, name))
        self.restart()

    def restart(self):
        self._monkeypatch.setattr(stevedore.ExtensionManager,
                                  'ENTRY_POINT_CACHE', {})

    def paths_scanned(self) -> int:
        """How many sys.path values were scanned (one file each)."""
        return len(os.listdir(self.directory))


@pytest.fixture
def entry_points(tmp_path, monkeypatch):
    return EntryPoints(tmp_path / 'entrypoints', monkeypatch)


@pytest.fixture
def acme_site(tmp_path):
    """A site-packages with acme_filters installed: the package and its
    ``*.dist-info`` (METADATA and entry_points.txt from pyproject.toml).
    Not yet on sys.path."""
    site = tmp_path / 'site-packages'
    shutil.copytree(ACME / 'acme_filters', site / 'acme_filters')
    entry_points, project = _entry_points_txt(ACME / 'pyproject.toml')
    dist_info = site / ('%s-%s.dist-info' % (
        project['name'].replace('-', '_'), project['version']))
    dist_info.mkdir()
    (dist_info / 'METADATA').write_text(
        'Metadata-Version: 2.1\nName: %s\nVersion: %s\n'
        % (project['name'], project['version']))
    (dist_info / 'entry_points.txt').write_text(entry_points)
    yield site
    # The weigher registered [filter_scheduler] acme_weight_multiplier on
    # cfg.CONF, as a real plugin does.  oslo.config cannot unregister an
    # option once arguments are parsed: drop it so that the other tests
    # see the scheduler's own options only (the conf fixture's reset()
    # after this clears oslo.config's cache of values).
    group = cfg.CONF._groups.get('filter_scheduler')
    if group is not None:
        group._opts.pop('acme_weight_multiplier', None)


@pytest.fixture
def acme(acme_site, entry_points, on_path):
    """acme_filters installed before the scheduler started."""
    on_path(acme_site, *ACME_MODULES)
    entry_points.restart()
    return acme_site


ACME_FLEET = [fixtures.report('plain1', memory_mb=4096),
              fixtures.report('bar1', memory_mb=8192),
              fixtures.report('bar2', memory_mb=8192),
              fixtures.report('baz1', memory_mb=16384)]
ACME_AGGREGATES = [
    fixtures.aggregate('acme-bar', ['bar1', 'bar2'], {'acme:foo': 'bar'}),
    fixtures.aggregate('acme-baz', ['baz1'], {'acme:foo': 'baz'})]


def _acme_scheduler(conf, weight_classes=('RAMWeigher',), **options):
    # available_filters keeps its default, scheduler.filters.all_filters:
    # an installed package's filters are part of it.
    conf.config(enabled_filters=['ComputeFilter', 'RamFilter', 'AcmeFilter'],
                weight_classes=list(weight_classes), group='filter_scheduler')
    driver = _scheduler([r.obj_clone() for r in ACME_FLEET], ACME_AGGREGATES)
    if options:
        # Options the plugin registers exist once it is loaded.
        conf.config(group='filter_scheduler', **options)
    return driver


def _names(classes):
    return {cls.__name__ for cls in classes}


def test_acme_is_found_by_entry_point_after_a_restart(acme_site,
                                                      entry_points, on_path):
    # A scheduler runs and has listed the filters.
    assert 'AcmeFilter' not in _names(filters.all_filters())
    # pip install acme-filters (here: its directory joins sys.path).
    on_path(acme_site, *ACME_MODULES)
    # The running process keeps its list: a reload (SIGHUP) cannot
    # enable a filter installed after start-up.
    assert 'AcmeFilter' not in _names(filters.all_filters())
    entry_points.restart()
    assert 'AcmeFilter' in _names(filters.all_filters())
    assert 'AcmeWeigher' in _names(weights.all_weighers())
    cls = loader.load_class(loader.FILTER_NAMESPACE, 'AcmeFilter')
    assert pathlib.Path(sys.modules[cls.__module__].__file__).is_relative_to(
        acme_site)
    # The on-disk cache holds one entry per sys.path: the new path was
    # scanned anew, not served from the entry of the old one.
    if entry_points.disk:
        assert entry_points.paths_scanned() == 2
    # pip uninstall, restart: gone again.
    sys.path.remove(str(acme_site))
    entry_points.restart()
    assert 'AcmeFilter' not in _names(filters.all_filters())


def test_acme_places_by_the_flavor_extra_spec(conf, acme):
    driver = _acme_scheduler(conf)
    assert type(driver.enabled_filters[-1]).__module__ == 'acme_filters.acme'
    bar = fixtures.request(extra_specs={'acme:foo': 'bar'}, num_instances=4)
    assert set(_hosts(driver.select_destinations(None, bar, None))) == \
        {'bar1', 'bar2'}
    baz = fixtures.request(extra_specs={'acme:foo': 'baz'})
    assert _hosts(driver.select_destinations(None, baz, None)) == ['baz1']


def test_acme_skips_requests_without_the_extra_spec(conf, acme):
    driver = _acme_scheduler(conf)
    report = filters.FilterReport()
    assert _hosts(driver.select_destinations(
        None, fixtures.request(), None, report=report)) == ['baz1']
    step = report.steps[-1]
    assert (step.name, step.hosts_in, step.hosts_out) == ('AcmeFilter', 4, 4)


def test_acme_rejects_an_unknown_value_and_says_why(conf, acme):
    driver = _acme_scheduler(conf)
    spec = fixtures.request(extra_specs={'acme:foo': 'qux'})
    with pytest.raises(exception.NoValidHost):
        driver.select_destinations(None, spec, None)
    result = driver.explain(None, spec)
    assert result['filters'][-1] == {'name': 'AcmeFilter', 'hosts_in': 4,
                                     'hosts_out': 0, 'removed': 4}
    assert result['rejected']['bar1/bar1']['reason'] == \
        "flavor extra spec acme:foo='qux' is not one of bar, baz"
    result = driver.explain(None, fixtures.request(
        extra_specs={'acme:foo': 'baz'}))
    assert result['rejected']['plain1/plain1']['reason'] == \
        "flavor wants acme:foo=baz; the host's aggregates offer none"


def test_acme_by_entry_point_name_in_available_filters(conf, acme):
    # Naming the entry point itself, instead of all_filters.
    conf.config(available_filters=['ComputeFilter', 'AcmeFilter'],
                group='filter_scheduler')
    conf.config(enabled_filters=['ComputeFilter', 'AcmeFilter'],
                group='filter_scheduler')
    assert [f.name() for f in filter_scheduler.FilterScheduler(
        fixtures.manager_with()).enabled_filters] == \
        ['ComputeFilter', 'AcmeFilter']


def test_acme_weigher_keeps_acme_hosts_free(conf, acme):
    # By RAM alone, baz1 (the biggest) would take a plain request.
    driver = _acme_scheduler(conf, ('RAMWeigher', 'AcmeWeigher'),
                             acme_weight_multiplier=2.0)
    assert _hosts(driver.select_destinations(
        None, fixtures.request(), None)) == ['plain1']
    # A request for ACME hardware is not pushed away from it.
    bar = fixtures.request(extra_specs={'acme:foo': 'bar'})
    assert _hosts(driver.select_destinations(None, bar, None))[0] in \
        {'bar1', 'bar2'}
    # The default weight_classes (all_weighers) include it once installed.
    assert 'AcmeWeigher' in [w.name() for w in _acme_scheduler(
        conf, weight_classes=['scheduler.weights.all_weighers']).weighers]


# --- c. DumpFilter -----------------------------------------------------------

@pytest.fixture
def dump(on_path):
    on_path(EXAMPLES / 'dump_filter', 'dump_filter')


def _dump_scheduler(conf):
    conf.config(available_filters=['scheduler.filters.all_filters',
                                   DUMP_FILTER],
                enabled_filters=['DumpFilter', 'ComputeFilter', 'RamFilter'],
                weight_classes=['RAMWeigher'], group='filter_scheduler')
    return _scheduler(
        [fixtures.report('small', memory_mb=1024),
         fixtures.report('big', memory_mb=8192, host_ip='192.0.2.7')],
        [fixtures.aggregate('az1', ['small', 'big'], zone='az1')])


def test_dump_filter_logs_request_and_hosts_and_passes_all(conf, dump,
                                                           caplog):
    caplog.set_level(logging.DEBUG, logger='dump_filter')
    driver = _dump_scheduler(conf)
    report = filters.FilterReport()
    spec = fixtures.request(memory_mb=2048, extra_specs={'acme:foo': 'bar'},
                            image_properties={'os_distro': 'cirros'},
                            num_instances=2)
    assert _hosts(driver.select_destinations(None, spec, None,
                                             report=report)) == ['big', 'big']
    lines = [r.getMessage() for r in caplog.records if r.name == 'dump_filter']
    requests = [line for line in lines
                if line.startswith('DumpFilter request')]
    host_lines = [line for line in lines if line.startswith('DumpFilter host')]
    # Once per instance: the request, then each candidate.
    assert len(requests) == 2
    assert "memory_mb=2048" in requests[0]
    assert "extra_specs={'acme:foo': 'bar'}" in requests[0]
    assert "image_properties={'os_distro': 'cirros'}" in requests[0]
    assert len(host_lines) == 2 + 1  # both hosts, then the one that fits
    big = [line for line in host_lines if 'big/big' in line]
    assert 'free_ram_mb=8192' in big[0] and 'host_ip=192.0.2.7' in big[0]
    assert "aggregates=['az1']" in big[0]
    assert "availability_zones=['az1']" in big[0]
    # The second instance sees the first one's claim.
    assert 'free_ram_mb=6144' in big[1]
    dump_steps = [s for s in report.steps if s.name == 'DumpFilter']
    assert all(s.removed == 0 for s in dump_steps)


def test_dump_filter_is_silent_and_cheap_without_debug(conf, dump, caplog,
                                                       monkeypatch):
    caplog.set_level(logging.INFO, logger='dump_filter')
    import dump_filter

    def fail(*args):
        raise AssertionError('described a host with debug off')

    monkeypatch.setattr(dump_filter, 'describe_host', fail)
    monkeypatch.setattr(dump_filter, 'describe_request', fail)
    driver = _dump_scheduler(conf)
    assert _hosts(driver.select_destinations(
        None, fixtures.request(), None)) == ['big']
    assert not [r for r in caplog.records if r.name == 'dump_filter']


# --- the guide shows these files as they are ---------------------------------

_INCLUDE = re.compile(r'<!-- file: (?P<path>\S+) -->\n```[a-z]*\n'
                      r'(?P<body>.*?)```\n', re.S)


def test_the_guide_shows_the_example_files_as_they_are():
    guide = GUIDE.read_text()
    shown = list(_INCLUDE.finditer(guide))
    assert shown, 'no "<!-- file: ... -->" code blocks in %s' % GUIDE
    for match in shown:
        path = REPO / match.group('path')
        assert match.group('body') == path.read_text(), (
            '%s shows an old copy of %s: paste the file again'
            % (GUIDE.relative_to(REPO), match.group('path')))
