"""What-if replay end to end: a real service records real calls over
RabbitMQ with claims in PostgreSQL; ``scheduler-manage snapshot`` and
``replay`` run them again offline; the report loads in Chromium."""

import json
import subprocess

from scheduler import exception
from scheduler.replay import trace
from tests.functional import browser
from tests.functional import daemons
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import uuids
from tests.functional.test_scheduler_service import wait_for_hosts

#: Memory of each host: no two hosts' free RAM is ever equal after
#: placing 1000 MB instances (the remainders differ), so no weight tie
#: is broken by the order hosts are known in, which differs between the
#: service (reports as they came) and the replay (the snapshot's order).
MEMORY = (20000, 21111, 22222, 23333, 24444, 25555)


def _fleet_file(tmp_path) -> str:
    groups = [{'prefix': 'rp%d' % n, 'count': 1, 'memory_mb': mb,
               'vcpus': 16, 'local_gb': 500 + 7 * n,
               'availability_zone': 'az%d' % (n % 2 + 1)}
              for n, mb in enumerate(MEMORY)]
    path = tmp_path / 'fleet.json'
    path.write_text(json.dumps({'groups': groups}))
    return str(path)


def test_a_recorded_trace_replays_to_the_same_placements(
        cluster, conf, postgresql_url, tmp_path):
    trace_path = tmp_path / 'trace.jsonl'
    extra = ('\n[trace]\nenabled = true\npath = %s\n\n'
             '[filter_scheduler]\nhost_subset_size = 1\n' % trace_path)
    # Claims stay pending (nothing is built): none may expire meanwhile.
    cluster.start_scheduler(postgresql_url, extra=extra,
                            scheduler_opts={'service_down_time': 120})
    cluster.start_sim(fleet=_fleet_file(tmp_path), service_down_time=120)
    wait_for_hosts(conf, postgresql_url, len(MEMORY))
    client_conf = cluster.client_config(postgresql_url)

    def manage(*args):
        done = subprocess.run(
            [daemons.console_script('scheduler-manage'), '--config-file',
             client_conf] + list(args), capture_output=True, text=True,
            timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    snap = str(tmp_path / 'snapshot.json')
    manage('snapshot', '--output', snap)

    answers = []

    def place(spec, count=1):
        ids = uuids(count)
        try:
            got = cluster.api.select_destinations(cluster.ctxt, spec, ids,
                                                  return_objects=True)
        except exception.NoValidHost:
            answers.append('NoValidHost')
            return ids, None
        hosts = [alts[0].service_host for alts in got]
        answers.append(hosts)
        return ids, hosts

    first, first_hosts = place(make_spec(ram=1000, disk=10))
    for _ in range(8):
        place(make_spec(ram=1000, disk=10))
    place(make_spec(ram=1000, disk=10, num=2), count=2)
    place(make_spec(ram=1000, disk=10, availability_zone='az1'))
    place(make_spec(ram=10 ** 6))                       # NoValidHost
    # A build through the cast: recorded as a request of its own.
    [cast] = uuids(1)
    cluster.api.schedule_run_instance(cluster.ctxt,
                                      make_spec(ram=1000, disk=10), [cast])

    def cast_recorded():
        for line in trace_path.read_text().splitlines():
            event = json.loads(line)
            if cast in event.get('instance_uuids', []):
                return event
    recorded = daemons.wait_for(cast_recorded, 60,
                                what='the cast in the trace')
    answers.append([recorded['answer']['hosts'][0][0]])
    # The compute deletes the first instance: its room is free again.
    cluster.api.delete_instance_info(cluster.admin_ctxt, first_hosts[0],
                                     first[0])
    daemons.wait_for(lambda: '"kind":"release"' in trace_path.read_text(),
                     30, what='the deletion in the trace')
    place(make_spec(ram=1000, disk=10))
    assert answers[11] == 'NoValidHost'

    # Project and user ids are hashed by default, never in clear.
    recorded = [e for e in trace.read([str(trace_path)])
                if e['kind'] == 'request']
    assert len(recorded) == 14
    assert '"project_id":"functional"' not in trace_path.read_text()
    assert {trace.spec_of(e).project_id[:2] for e in recorded} == {'h-'}

    pack = tmp_path / 'pack.conf'
    pack.write_text('[filter_scheduler]\nhost_subset_size = 1\n'
                    'ram_weight_multiplier = -1.0\n'
                    'cpu_weight_multiplier = -1.0\n'
                    'disk_weight_multiplier = -1.0\n'
                    'io_ops_weight_multiplier = 0.0\n')
    out_json, out_html = tmp_path / 'out.json', tmp_path / 'out.html'
    done = manage('replay', '--fleet', snap, '--trace', str(trace_path),
                  '--config', str(cluster.tmp / 'sched.conf'),
                  '--config', str(pack), '--json', str(out_json),
                  '--html', str(out_html))
    assert 'replay sched:' in done.stderr     # progress was shown
    document = json.loads(out_json.read_text())
    same, packed = document['configs']
    assert same['name'] == 'sched' and packed['name'] == 'pack'
    # Faithful: every request went where the service sent it.
    assert same['same_as_recorded'] == {'requests': 14, 'same': 14}
    replayed = [r['results']['sched']['hosts'] or 'NoValidHost'
                for r in document['requests']]
    assert replayed == answers
    assert same['no_valid_host'] == 1 and same['releases'] == 1
    assert same['releases_unknown'] == 0
    # Packing puts the same instances on fewer hosts.
    assert packed['hosts_used'] < same['hosts_used']
    assert packed['placed'] == same['placed']

    browser.check_report(str(out_html), str(tmp_path), ['sched', 'pack'])

    # What still fits, on a copy of the live inventory (claims included).
    done = manage('capacity', '--flavor', 'one:1000:1:10', '--format',
                  'json', '--quiet')
    fits = {row['zone']: row['fits'] for row in json.loads(done.stdout)}
    assert set(fits) == {'az1', 'az2', '*'}
    assert fits['*'] == fits['az1'] + fits['az2'] > 0


def test_the_demo_report_loads_in_a_browser(tmp_path):
    out_json, out_html = tmp_path / 'demo.json', tmp_path / 'demo.html'
    done = subprocess.run(
        [daemons.console_script('scheduler-manage'), 'replay', 'demo',
         '--hosts', '12', '--requests', '600', '--explain', '10',
         '--json', str(out_json), '--html', str(out_html)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(out_json.read_text())
    names = [c['name'] for c in document['configs']]
    assert names == ['spread', 'pack']
    browser.check_report(str(out_html), str(tmp_path), names)
    # Every request is reachable by clicking, not only the first rows
    # the table lists: the last one is (after "more").
    last = len(document['requests']) - 1
    assert last >= 500
    shown = browser.click(str(out_html), str(tmp_path), last)
    assert shown['request'] == str(last) and shown['pages'] >= 1, shown
    assert shown['hash'] == '#request=%d' % last
    assert 'Filter walk:' in shown['text']
