"""Versioned objects of the scheduler.

Importing this package registers every object, so that the registry and
this package's attributes (``objects.RequestSpec``, ...) know them.
"""


def register_all() -> None:
    __import__('scheduler.objects.flavor')
    __import__('scheduler.objects.image_meta')
    __import__('scheduler.objects.numa')
    __import__('scheduler.objects.pci')
    __import__('scheduler.objects.instance_group')
    __import__('scheduler.objects.request_parts')
    __import__('scheduler.objects.host_state')
    __import__('scheduler.objects.selection')
    __import__('scheduler.objects.request_spec')
    __import__('scheduler.objects.notification')


register_all()
