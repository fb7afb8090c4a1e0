"""A simulated fleet of compute hosts, for demos and tests without a cloud.

* ``scheduler.simulator.fleet``: the fleet's description (N identical
  hosts, or a JSON fleet file of host groups and aggregates);
* ``scheduler.simulator.agent``: the simulated compute agents that report
  to the scheduler and serve ``run_instance`` / ``terminate_instance``,
  and ``Fleet``, which runs them all on one transport (see its module
  for how to silence a host from outside the process).

``scheduler-compute-sim`` runs a fleet as its own process;
``scheduler-demo`` runs one next to the scheduler.
"""

from scheduler.simulator.agent import Fleet
from scheduler.simulator.agent import SimulatedCompute
from scheduler.simulator.fleet import FleetError
from scheduler.simulator.fleet import FleetSpec
from scheduler.simulator.fleet import HostSpec

__all__ = ['Fleet', 'FleetError', 'FleetSpec', 'HostSpec',
           'SimulatedCompute']
