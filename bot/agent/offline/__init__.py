"""The offline generator's shared half: kernels from the reference's own graph, no LLM.

It traces the reference with torch.export (symbolic sizes, `trace`), lowers the
decomposed ATen graph to an IR of pointwise ops, reductions, views and matmuls (`graph`,
`sizes`), and runs each backend's emitter in a sandboxed worker (`run`, `__main__`) on an
`OfflineJob` (`job`). The emitters live beside their backend:
bot/agent/backends/<name>/offline/, each with `generate_offline(job) -> OfflineResult`.
Anything outside the IR's families is answered `unsupported`, naming the ops, so the
caller can point the user at an LLM endpoint instead.
"""
