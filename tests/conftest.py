"""Test-wide setup: Triton runs through its CPU interpreter in the test process too."""

import os

# Before anything imports triton: @triton.jit reads it when a kernel is defined.
os.environ.setdefault("TRITON_INTERPRET", "1")
