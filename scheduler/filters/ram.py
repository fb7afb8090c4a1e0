"""RamFilter: enough RAM, counting the host's RAM allocation ratio."""

from scheduler.filters import base
from scheduler.resources import compute


class RamFilter(base.RequestScopedFilter):
    """Passes hosts whose usable RAM (total x ratio - used) fits the
    flavor.  As in nova, an instance never overcommits against itself:
    one asking for more RAM than the host physically has is refused
    whatever the allocation ratio."""

    def prepare(self, spec_obj) -> int:
        return spec_obj.flavor.memory_mb

    def passes(self, host_state, requested: int) -> base.Verdict:
        if compute.larger_than_host(requested, host_state.memory_mb):
            return base.Rejected(
                'requested %d MB RAM > %d MB physical RAM (no overcommit '
                'against itself)', requested, host_state.memory_mb)
        usable = compute.usable_ram_mb(host_state)
        if usable >= requested:
            return True
        return base.Rejected(
            'usable RAM %d MB < requested %d MB (total %d MB x ratio %s, '
            'used %d MB)', usable, requested, host_state.memory_mb,
            host_state.allocation_ratio('ram'), host_state.memory_mb_used)

    def filter_columns(self, columns, requested: int):
        """``passes`` over columns (``scheduler.columns``)."""
        return (requested <= columns.memory_mb) & (
            columns.usable_ram_mb >= requested)

    def host_limits(self, host_state, spec_obj) -> dict:
        """How far the compute (and the claim) may oversubscribe RAM."""
        ratio = host_state.allocation_ratio('ram')
        return {'memory_mb': host_state.memory_mb * ratio}
