"""Tests of the compute simulator."""
