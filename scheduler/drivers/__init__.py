"""In-tree scheduler drivers (entry points in ``scheduler.drivers``)."""
