"""Tests of runners/ascendc/: parsers, detection, lint, tiling, packages and the backend."""
