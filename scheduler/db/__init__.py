"""The inventory: the only place that talks SQL."""
