"""`scripts/gpu-check`: the GPU check in one command (issue 16, item 5).

On a machine whose Python already has CUDA torch and triton: make a venv that sees them
(`--system-site-packages`), install opbot with `--no-deps` plus only the requirements that
are missing (from a wheel folder where there is no index), run `pytest -m gpu` and
`opbot generate --backend triton --llm offline` on every example operator, all within one
wall-clock budget, and write `gpu-check.json` and `gpu-check.md`.

Only the standard library in this package: it runs under the machine's own Python, before
opbot's dependencies are installed (and imports nothing else of opbot).
"""
