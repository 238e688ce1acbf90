"""The Ascend C backend: toolchain detection, build and run on Ascend NPUs (CANN)."""
