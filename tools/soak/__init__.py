"""A fault soak of the scheduler: ``python -m tools.soak`` (see __main__)."""
