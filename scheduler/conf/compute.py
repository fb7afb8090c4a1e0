"""Options in ``[compute]``: how the scheduler reaches compute agents."""

from oslo_config import cfg

compute_group = cfg.OptGroup(
    'compute', title='Compute agent options',
    help='How the scheduler reaches compute agents, and the defaults the '
         'compute simulator reports.')

compute_opts = [
    cfg.StrOpt(
        'topic',
        default='compute',
        help="""
The topic compute agents listen on.  ``schedule_run_instance`` casts
``run_instance`` to ``Target(topic=<this>, server=<chosen host>)``.

Related options:

* ``[scheduler] topic``
"""),
    cfg.FloatOpt(
        'cpu_allocation_ratio',
        default=4.0,
        min=0.0,
        help="""
Virtual CPU to physical CPU ratio that simulated compute agents report
when their fleet file does not set one.  The scheduler's VCPUFilter
uses the ratio each host reports.
"""),
    cfg.FloatOpt(
        'ram_allocation_ratio',
        default=1.0,
        min=0.0,
        help="""
Virtual RAM to physical RAM ratio that simulated compute agents report
when their fleet file does not set one.  The scheduler's RamFilter uses
the ratio each host reports.
"""),
    cfg.FloatOpt(
        'disk_allocation_ratio',
        default=1.0,
        min=0.0,
        help="""
Virtual disk to physical disk ratio that simulated compute agents report
when their fleet file does not set one.  The scheduler's DiskFilter uses
the ratio each host reports.
"""),
]


def list_opts() -> dict:
    return {compute_group: compute_opts}
