"""Options in ``[upgrade_levels]``: RPC version caps for rolling upgrades."""

from oslo_config import cfg

upgrade_group = cfg.OptGroup(
    'upgrade_levels', title='Upgrade levels',
    help='Caps on the RPC API versions this node sends, for rolling '
         'upgrades with older schedulers still on the bus.')

upgrade_opts = [
    cfg.StrOpt(
        'scheduler',
        help="""
The highest scheduler RPC API version that callers on this node send.

Leave unset to send the newest version this code knows.  During a
rolling upgrade, set it to the version of the oldest scheduler still
running (for example ``1.0`` for a scheduler that speaks only the
legacy dict API) so that new callers keep working with it; remove the
cap once every scheduler is upgraded.  ``auto`` asks a running
scheduler for its version once and caps to it.
"""),
]


def list_opts() -> dict:
    return {upgrade_group: upgrade_opts}
