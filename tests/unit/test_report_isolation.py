"""Which failed report writes are split to find a bad row, which kept."""

from oslo_db import exception as db_exc

from scheduler import report_isolation


def _parts(n: int) -> list:
    return [report_isolation.Part(('h%d' % i, 'h%d' % i), row={'i': i})
            for i in range(n)]


def _save(fail):
    calls = []

    def save(rows, usage):
        calls.append([row['i'] for row in rows])
        error = fail(rows)
        if error is not None:
            raise error
        return len(rows)
    return save, calls


def test_a_row_the_database_refuses_is_refused_alone():
    save, calls = _save(lambda rows: db_exc.DBDataError('too long')
                        if any(row['i'] == 3 for row in rows) else None)
    written = []
    outcome = report_isolation.write(
        save, _parts(6), lambda parts, result: written.extend(
            p.row['i'] for p in parts))
    assert [p.row['i'] for p in outcome.refused] == [3]
    assert outcome.unwritten == [] and outcome.error is None
    assert written == [0, 1, 2, 4, 5]


def test_an_error_that_blames_no_row_keeps_the_whole_batch():
    """A missing column or permission fails every row alike: split, it
    would drop the fleet's reports one by one, each with an ERROR."""
    error = db_exc.DBError('column "uuid" does not exist')
    save, calls = _save(lambda rows: error)
    parts = _parts(6)
    outcome = report_isolation.write(save, parts, lambda *a: None)
    assert calls == [[0, 1, 2, 3, 4, 5]]
    assert outcome.refused == []
    assert outcome.unwritten == parts and outcome.error is error


def test_an_outage_while_splitting_keeps_what_is_left():
    state = {'calls': 0}

    def fail(rows):
        state['calls'] += 1
        if state['calls'] == 1:
            return db_exc.DBDataError('too long')
        return db_exc.DBConnectionError('gone')
    save, calls = _save(fail)
    parts = _parts(4)
    outcome = report_isolation.write(save, parts, lambda *a: None)
    assert outcome.refused == []
    assert outcome.unwritten == parts
    assert isinstance(outcome.error, db_exc.DBConnectionError)


def test_a_drivers_error_wrapped_by_sqlalchemy_blames_the_row_too():
    """Statements oslo.db does not see raise SQLAlchemy's wrapper of the
    driver's error (PostgreSQL's "value too long" is a DataError)."""
    from sqlalchemy import exc as sa_exc
    wrapped = sa_exc.DataError('UPDATE hosts', {},
                               Exception('value too long'))
    # As oslo.db passes it on: a plain DBError around SQLAlchemy's.
    for error in (wrapped, db_exc.DBError(wrapped)):
        save, calls = _save(lambda rows: error
                            if any(row['i'] == 1 for row in rows) else None)
        outcome = report_isolation.write(save, _parts(2), lambda *a: None)
        assert [p.row['i'] for p in outcome.refused] == [1], error
