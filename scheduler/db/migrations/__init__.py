"""The alembic environment of the inventory (see scheduler.db.migration)."""
