"""The all-in-one demo: a scenario, the buses it runs on, the caller.

``scheduler.cmd.demo`` is the console script; see its docstring for
what the demo does.
"""
