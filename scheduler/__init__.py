"""A standalone, nova-style compute scheduler built on the oslo libraries."""
