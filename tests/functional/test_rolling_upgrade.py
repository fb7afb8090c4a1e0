"""A rolling upgrade against the previous release, both ways.

The previous release (``OLD_RELEASE`` of this repository's history) is
installed once per session into a virtualenv of its own, from ``git
archive``; its daemons and its ``scheduler-manage`` run from there,
never importing this checkout.  Mixed pairs, as during an upgrade:

* this release's service with the old release's computes and callers;
* the old release's service with this release's computes and callers,
  with ``[upgrade_levels] scheduler = auto`` (as the admin guide says)
  and without it (the step skipped): then the new side fails loudly,
  at the sender, rather than sending where the old service never looks.

When the old release cannot be built (no git history, no package
index), the tests are skipped with a banner, and fail under CI=true.
"""

import json
import os
import subprocess
import sys
import uuid

import pytest

from scheduler import exception
from scheduler import objects
from scheduler import rpcapi
from tests.functional import daemons
from tests.functional import services

#: The release the upgrade starts from.
OLD_RELEASE = 'd220c38'
HOSTS = 4


@pytest.fixture(scope='session')
def old_release(tmp_path_factory) -> str:
    """The bin directory of a virtualenv holding ``OLD_RELEASE``."""
    root = tmp_path_factory.mktemp('old-release')
    src, venv = root / 'src', root / 'venv'
    src.mkdir()
    try:
        archive = subprocess.run(
            ['git', 'archive', OLD_RELEASE], cwd=daemons.REPO_ROOT,
            capture_output=True, check=True, timeout=120).stdout
        subprocess.run(['tar', '-x', '-C', str(src)], input=archive,
                       capture_output=True, check=True, timeout=120)
        subprocess.run([sys.executable, '-m', 'venv', str(venv)],
                       capture_output=True, check=True, timeout=120)
        # pbr reads the version from git, which an archive lacks.
        env = dict(os.environ, PBR_VERSION='0.0.0')
        env.pop('PYTHONPATH', None)
        subprocess.run([str(venv / 'bin' / 'pip'), 'install', '-q',
                        '%s[postgresql]' % src], capture_output=True,
                       check=True, timeout=900, env=env)
    except (subprocess.SubprocessError, OSError) as e:
        detail = getattr(e, 'stderr', b'') or b''
        services.unreachable(
            'the previous release %s could not be installed: %s %s'
            % (OLD_RELEASE, e, detail.decode(errors='replace')[-500:]))
    return str(venv / 'bin')


def make_spec(**kwargs) -> objects.RequestSpec:
    return objects.RequestSpec(
        flavor=objects.Flavor(memory_mb=512, vcpus=1, root_gb=1),
        num_instances=1, project_id='functional', user_id='tester',
        **kwargs)


def start_old_service(cluster, bin_dir: str, database_url: str,
                      name: str = 'oldsched') -> daemons.Daemon:
    path = cluster.service_config(name, database_url)
    daemon = daemons.Daemon('scheduler-service', ['--config-file', path],
                            str(cluster.tmp / ('%s.log' % name)),
                            bin_dir=bin_dir)
    cluster.daemons.append(daemon)
    cluster.server_names.add(name)
    cluster.scheduler = daemon
    cluster.wait_ready(daemon, name, serving_line=False)
    return daemon


def start_old_sim(cluster, bin_dir: str, name: str = 'oldsim'):
    """The old simulator: one RPC server (and queue) per host."""
    path = daemons.write_multi_config(
        str(cluster.tmp / ('%s.conf' % name)),
        '[DEFAULT]\ntransport_url = %s\nhost = %s\nlog_file = %s\n'
        'debug = true\n\n[scheduler]\ntopic = %s\nreport_interval = 1\n'
        '\n[compute]\ntopic = %s\n'
        % (cluster.transport_url, name, cluster.tmp / ('%s.log' % name),
           cluster.topic, cluster.compute_topic))
    prefix = daemons.unique_topic('old')
    # The old simulator's per-host queues go with the cluster, whether
    # or not the hosts ever appear.
    cluster.queues.update('%s.%s-%03d' % (cluster.compute_topic, prefix, n)
                          for n in range(1, HOSTS + 1))
    daemon = daemons.Daemon(
        'scheduler-compute-sim',
        ['--config-file', path, '--hosts', str(HOSTS), '--prefix', prefix,
         '--control-dir', cluster.control_dir],
        str(cluster.tmp / ('%s.log' % name)), bin_dir=bin_dir)
    cluster.daemons.append(daemon)
    return daemon


def hosts_known(cluster, api=None) -> dict:
    answer = (api or cluster.api).explain(cluster.admin_ctxt, make_spec())
    return answer


def wait_hosts(cluster, api=None) -> list:
    answer = daemons.wait_for(
        lambda: (lambda a: a if a['hosts_known'] == HOSTS else None)(
            hosts_known(cluster, api)),
        90, interval=1, what='%d hosts known to the scheduler' % HOSTS)
    return sorted(r['host'] for r in answer['ranking'])


def old_manage(cluster, bin_dir: str, database_url: str, *args) -> dict:
    config = cluster.client_config(database_url)
    env = dict(os.environ)
    env.pop('PYTHONPATH', None)
    done = subprocess.run(
        [os.path.join(bin_dir, 'scheduler-manage'), '--config-file', config]
        + list(args) + ['--format', 'json'], capture_output=True,
        text=True, timeout=120, env=env, cwd=bin_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def capped_api(conf, cap: str | None) -> rpcapi.SchedulerAPI:
    """A new-release caller with ``[upgrade_levels] scheduler = cap``."""
    conf.config(scheduler=cap, group='upgrade_levels')
    return rpcapi.SchedulerAPI(timeout=30)


def zone_aggregate(hosts: list) -> objects.Aggregate:
    return objects.Aggregate(id=7, uuid=str(uuid.uuid4()), name='upgrade',
                             hosts=hosts,
                             metadata={'availability_zone': 'upgrade-az'})


def test_new_service_old_computes_and_callers(cluster, conf, postgresql_url,
                                              old_release):
    # The old computes stamp no broker login and report on the request
    # topic: taken only in the upgrade window the option opens.
    cluster.start_scheduler(
        postgresql_url,
        extra='[trust]\naccept_unstamped_legacy_casts = true\n')
    sim = start_old_sim(cluster, old_release)
    names = wait_hosts(cluster)
    assert len(names) == HOSTS

    selected = old_manage(cluster, old_release, postgresql_url, 'select')
    assert any(name in json.dumps(selected) for name in names), selected
    explained = old_manage(cluster, old_release, postgresql_url, 'explain',
                           '--admin')
    assert explained['hosts_known'] == HOSTS, explained

    assert sim.alive(), sim.log()[-3000:]
    log = cluster.scheduler.log()
    assert 'Traceback' not in log, log[-5000:]


def test_old_service_new_computes_and_callers_auto(cluster, conf,
                                                   postgresql_url,
                                                   old_release):
    old = start_old_service(cluster, old_release, postgresql_url)
    cluster.shared_config += '[upgrade_levels]\nscheduler = auto\n\n'
    sim = cluster.start_sim(hosts=HOSTS)
    api = capped_api(conf, 'auto')
    names = wait_hosts(cluster, api)

    # Every report, the first of each host included, was readable.
    log = old.log()
    assert 'Traceback' not in log, log[-5000:]
    assert 'Ignored' not in log, log[-5000:]
    assert 'IncompatibleObjectVersion' not in log, log[-5000:]

    selections = api.select_destinations(cluster.admin_ctxt, make_spec(),
                                         [str(uuid.uuid4())])
    assert selections[0][0].service_host in names

    # The operator cast reaches the old service: only then is the zone
    # it creates known there.
    api.update_aggregates(cluster.admin_ctxt, [zone_aggregate(names[:1])])
    placed = daemons.wait_for(
        lambda: api.select_destinations(
            cluster.admin_ctxt, make_spec(availability_zone='upgrade-az'),
            [str(uuid.uuid4())]),
        30, interval=1, what='the aggregate cast to reach the old service')
    assert placed[0][0].service_host == names[0]
    assert sim.alive(), sim.log()[-3000:]


def test_old_service_new_computes_and_callers_without_cap(
        cluster, conf, postgresql_url, old_release):
    old = start_old_service(cluster, old_release, postgresql_url)
    sim = cluster.start_sim(hosts=HOSTS)
    # The simulator cannot report: it says so in one line and ends.
    status = sim.wait_exit(60)
    assert status == 2, sim.log()[-3000:]
    log = sim.log()
    assert 'Traceback' not in log, log[-3000:]
    errors = [line for line in log.splitlines() if ' ERROR ' in line]
    assert errors, log[-3000:]
    assert all('[upgrade_levels] scheduler = auto' in line
               for line in errors), errors

    api = capped_api(conf, None)
    # What the old service hears still works: calls at 1.2 / 1.3.
    assert api.explain(cluster.admin_ctxt, make_spec())['hosts_known'] == 0
    # What it would not hear fails at the sender, typed.
    with pytest.raises(exception.SchedulerTooOld) as raised:
        api.update_aggregates(cluster.admin_ctxt, [zone_aggregate([])])
    assert 'older than 1.4' in str(raised.value)
    assert 'Traceback' not in old.log()
