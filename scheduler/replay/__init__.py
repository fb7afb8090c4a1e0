"""What-if replay: a recorded trace run offline under other configurations.

* ``trace``: the trace file (recording in the service, reading);
* ``snapshot``: a fleet snapshot from the inventory, and loading a
  snapshot or a simulator fleet file for a replay;
* ``runner``: one configuration's replay on an in-memory inventory,
  through the real driver and claims;
* ``compare``: the figures compared across configurations (the JSON);
* ``html``: the self-contained HTML report;
* ``demo``: a generated fleet and trace, and the shipped configurations;
* ``capacity``: how many more of each flavor fit now.
"""
