"""Nova's names for the options this service reads under other names.

The seeds configure nova's scheduler with ``[DEFAULT]`` options such as
``scheduler_default_filters``; later nova releases moved them into
``[scheduler]`` and ``[filter_scheduler]``.  This service reads only its
own names, and oslo.config ignores any other key without a word, so a
configuration carried over from nova would run with the defaults.
``scheduler-manage config check`` fails on every name listed here and
says which option to set instead.
"""

#: ``(group, nova's name) -> (group, this service's name)``.
RENAMED = {
    ('DEFAULT', 'scheduler_driver'): ('scheduler', 'driver'),
    ('DEFAULT', 'scheduler_topic'): ('scheduler', 'topic'),
    ('DEFAULT', 'scheduler_max_attempts'): ('scheduler', 'max_attempts'),
    ('DEFAULT', 'scheduler_driver_task_period'):
        ('scheduler', 'periodic_task_interval'),
    ('DEFAULT', 'scheduler_available_filters'):
        ('filter_scheduler', 'available_filters'),
    ('DEFAULT', 'scheduler_default_filters'):
        ('filter_scheduler', 'enabled_filters'),
    ('DEFAULT', 'scheduler_weight_classes'):
        ('filter_scheduler', 'weight_classes'),
    ('DEFAULT', 'scheduler_host_subset_size'):
        ('filter_scheduler', 'host_subset_size'),
    ('DEFAULT', 'ram_weight_multiplier'):
        ('filter_scheduler', 'ram_weight_multiplier'),
    ('DEFAULT', 'io_ops_weight_multiplier'):
        ('filter_scheduler', 'io_ops_weight_multiplier'),
    ('DEFAULT', 'max_io_ops_per_host'):
        ('filter_scheduler', 'max_io_ops_per_host'),
    ('DEFAULT', 'max_instances_per_host'):
        ('filter_scheduler', 'max_instances_per_host'),
    ('DEFAULT', 'isolated_images'): ('filter_scheduler', 'isolated_images'),
    ('DEFAULT', 'isolated_hosts'): ('filter_scheduler', 'isolated_hosts'),
    ('DEFAULT', 'restrict_isolated_hosts_to_isolated_images'):
        ('filter_scheduler', 'restrict_isolated_hosts_to_isolated_images'),
}


def replacement(group: str, name: str) -> tuple | None:
    """This service's ``(group, name)`` for nova's option, if it has one."""
    return RENAMED.get((group, name.replace('-', '_')))
