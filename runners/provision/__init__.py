"""Setting up self-hosted Ascend runners: image, service units, runner registration.

See README.md beside this file for the procedure. `github_jit` is importable here and also
runs on its own (`python3 github_jit.py`): a runner host need not have opbot installed.
"""
