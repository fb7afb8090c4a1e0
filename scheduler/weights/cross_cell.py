"""CrossCellWeigher: on a move that may cross cells, prefer the
instance's own cell."""

from scheduler.weights import base


def preferred_cell(spec_obj) -> str | None:
    """The cell a cross-cell move should rather stay in, or None.

    Set only when ``requested_destination`` names a cell *and* allows
    cross-cell moves: otherwise the candidates are already restricted
    to that cell (or no cell matters) and there is nothing to prefer.
    """
    dest = spec_obj.obj_get('requested_destination')
    if dest is None or not dest.obj_get('cell'):
        return None
    if not dest.obj_get('allow_cross_cell_move'):
        return None
    return dest.cell


class CrossCellWeigher(base.BaseHostWeigher):
    """Weighs hosts by their cell, as nova does: on a move allowed to
    cross cells, a host in the requested (source) cell weighs 1 and
    any other -1; every other request weighs 0 everywhere.  The
    multiplier is ``cross_cell_move_weight_multiplier`` (aggregate
    metadata of the same name overrides it); the default is huge, so
    that a move leaves its cell only when it must.
    """

    multiplier_option = 'cross_cell_move_weight_multiplier'

    def weigh_columns(self, columns, spec_obj):
        """0 everywhere, or None (per host) on a cross-cell move."""
        return 0.0 if preferred_cell(spec_obj) is None else None

    def weigh_objects(self, weighed_hosts: list, spec_obj) -> list:
        cell = preferred_cell(spec_obj)
        if cell is None:
            return [0.0] * len(weighed_hosts)
        return [1.0 if w.obj.cell_uuid == cell else -1.0
                for w in weighed_hosts]
