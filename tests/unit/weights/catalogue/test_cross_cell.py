"""CrossCellWeigher: a move allowed to cross cells prefers its own cell."""

from scheduler import objects
from scheduler.weights import cross_cell as mod
from tests.unit.filters.catalogue import aggregate
from tests.unit.filters.catalogue import host
from tests.unit.filters.catalogue import request
from tests.unit.weights.catalogue import contributions
from tests.unit.weights.catalogue import ranking


def _hosts():
    return [host('far', cell_uuid='cell2'), host('near', cell_uuid='cell1'),
            host('nowhere')]


def _move(allow=True):
    return request(requested_destination=objects.Destination(
        cell='cell1', allow_cross_cell_move=allow))


def test_a_cross_cell_move_prefers_the_source_cell():
    assert ranking(mod.CrossCellWeigher(), _hosts(), _move())[0] == 'near'
    scores = contributions(mod.CrossCellWeigher(), _hosts(), _move())
    # +1 in the cell, -1 elsewhere, normalised, times 1000000.
    assert scores['near'] == 1000000.0
    assert scores['far'] == scores['nowhere'] == 0.0


def test_nothing_to_prefer_without_a_cross_cell_move():
    for spec in (request(), _move(allow=False)):
        assert set(contributions(mod.CrossCellWeigher(), _hosts(),
                                 spec).values()) == {0.0}


def test_negative_multiplier_prefers_other_cells(conf):
    conf.config(cross_cell_move_weight_multiplier=-1.0,
                group='filter_scheduler')
    assert ranking(mod.CrossCellWeigher(), _hosts(), _move())[-1] == 'near'


def test_aggregate_override():
    hosts = [host('far', cell_uuid='cell2'),
             host('near', cell_uuid='cell1', aggregates=[
                 aggregate(cross_cell_move_weight_multiplier='2')])]
    assert contributions(mod.CrossCellWeigher(), hosts, _move())[
        'near'] == 2.0
