"""The verification harness's child side: runs in a separate process with a timeout.

`python -m runners.harness JOB.json RESULT.json` loads the reference and the candidate,
runs every check and writes a VerifyResult as JSON. Everything that may hang, crash or
misbehave (user code, kernels) happens here, never in the bot's own process.
"""
