"""Tests of runners/: the judge, its workers and sandbox, the static scan, the backends."""
