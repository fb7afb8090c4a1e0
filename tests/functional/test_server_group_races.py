"""Members of one server group asked for at once, of several workers.

A conductor boots the members of a server group in parallel (one
request each, as nova's does for separate boots). Each worker of each
service chooses with what the inventory held when it looked: without a
check in the claim, every worker chose the same best host for its
member; and for an affinity group, two workers started the group on
two hosts.
"""

import threading
import uuid

from scheduler import objects
from tests.functional.test_scheduler_service import database_url  # noqa: F401,E501 (fixture)
from tests.functional.test_scheduler_service import make_spec
from tests.functional.test_scheduler_service import uuids
from tests.functional.test_scheduler_service import wait_for_hosts

FILTERS = ('[filter_scheduler]\nenabled_filters = ComputeFilter,RamFilter,'
           'ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter\n')


def _at_once(api, ctxt, group_uuid: str, members: list,
             policy: str = 'anti-affinity') -> list:
    """The host of each member, each asked for in a request of its own,
    all at once."""
    hosts: dict = {}

    def place(member):
        group = objects.InstanceGroup(uuid=group_uuid,
                                      policy=policy,
                                      members=members, hosts=[])
        try:
            [[chosen]] = api.select_destinations(
                ctxt, make_spec(instance_group=group), [member])
            hosts[member] = chosen.service_host
        except Exception as e:  # reported in the assertion below
            hosts[member] = type(e).__name__
    threads = [threading.Thread(target=place, args=(m,)) for m in members]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [hosts[m] for m in members]


def _two_services_of_two_workers(cluster, conf, db: str) -> None:
    for name in ('s1', 's2'):
        cluster.start_scheduler(db, name=name,
                                scheduler_opts={'workers': 2},
                                extra=FILTERS)
    cluster.start_sim(hosts=4)
    wait_for_hosts(conf, db, 4)


def test_concurrent_members_of_an_anti_affinity_group_land_apart(
        cluster, conf, database_url):  # noqa: F811 (fixture)
    _two_services_of_two_workers(cluster, conf, database_url)
    for _round in range(3):
        placed = _at_once(cluster.api, cluster.ctxt, str(uuid.uuid4()),
                          uuids(4))
        assert len(set(placed)) == 4, placed


def test_concurrent_members_of_an_affinity_group_land_together(
        cluster, conf, database_url):  # noqa: F811 (fixture)
    _two_services_of_two_workers(cluster, conf, database_url)
    for _round in range(3):
        placed = _at_once(cluster.api, cluster.ctxt, str(uuid.uuid4()),
                          uuids(4), policy='affinity')
        assert len(set(placed)) == 1, placed
