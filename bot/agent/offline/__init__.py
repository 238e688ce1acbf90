"""The offline generator: Triton kernels from the reference's own graph, no LLM needed.

It traces the reference with torch.export (symbolic sizes), lowers the decomposed ATen
graph to pointwise ops, reductions, views and matmuls, fuses what it can and writes one
readable kernel file. Anything outside those families is answered `unsupported`, naming
the ops, so the caller can point the user at an LLM endpoint instead.
"""
