"""Defaults of the replay and capacity commands that the command line
shows in its help: here, apart from ``runner`` and ``capacity``, so
that ``scheduler-manage --help`` need not import the replay machinery
(the driver, the filters, the objects) to print them."""

#: Requests explained in full (filter walk per host, ranking), at most,
#: besides the refusals: sampled evenly over the trace.
DEFAULT_EXPLAINED = 100
#: Refusals explained in full, at most.
MAX_EXPLAINED_REFUSALS = 100
#: Instances counted per flavor and zone at most; beyond, "at least".
DEFAULT_LIMIT = 10000
