"""One alembic revision a module, oldest first by ``down_revision``."""
