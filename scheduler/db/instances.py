"""The ``instances`` table: claims and placements, as they are read.

Writes go through the claim protocol of ``scheduler.db.usage``, which
keeps each node's usage in step with its placements; this module reads
them and names their states.
"""

import sqlalchemy as sa

from scheduler.db.engine import transaction
from scheduler.db import models

#: A placement the scheduler made and the compute has not yet confirmed.
CLAIMED = 'claimed'
#: A placement the compute confirmed.
ACTIVE = 'active'
#: A confirmed placement that the node's last report no longer lists:
#: pending again (its usage back in ``claimed_*``) until a report lists
#: it, dropped by the next one that does not (``usage.apply_reports``).
UNLISTED = 'unlisted'
#: A claim that replaced the instance's placement on the same node (a
#: resize there): the node's reports list the instance at its old size
#: until the resize begins, so none settles it before the compute
#: confirmed it; then, as ``RESIZE_ACTIVE``, only a report taken after
#: the confirmation does (``usage.apply_in``).
RESIZE_CLAIMED = 'resize_claimed'
RESIZE_ACTIVE = 'resize_active'
#: Claims the compute has not confirmed (pending, left to expiry), and
#: what its confirmation (``usage.confirm``) makes of each.
UNCONFIRMED = (CLAIMED, RESIZE_CLAIMED)
CONFIRMED = dict(zip(UNCONFIRMED, (ACTIVE, RESIZE_ACTIVE)))


def _instance_dict(row: models.Instance) -> dict:
    return {
        'instance_uuid': row.instance_uuid,
        'host': row.host,
        'nodename': row.nodename,
        'project_id': row.project_id,
        'user_id': row.user_id,
        'memory_mb': row.memory_mb,
        'vcpus': row.vcpus,
        'disk_gb': row.disk_gb,
        'status': row.status,
        'pending': bool(row.pending),
        'created_at': row.created_at,
        'updated_at': row.updated_at,
    }


def instance_get_all(host: str | None = None) -> list[dict]:
    """Every placement (or those on ``host``), by host, node and uuid."""
    stmt = sa.select(models.Instance).order_by(
        models.Instance.host, models.Instance.nodename,
        models.Instance.instance_uuid)
    if host is not None:
        stmt = stmt.where(models.Instance.host == host)
    with transaction() as session:
        return [_instance_dict(row) for row in session.scalars(stmt)]
