"""Static (AST) anti-cheat check of a candidate's source.

A candidate defines ``class ModelNew(nn.Module)`` (KernelBench convention) whose forward
must compute the operator with kernels of the backend (``@triton.jit`` functions launched as
``kernel[grid](...)``), never with PyTorch, NumPy or the reference. The scan reads the
source without running it and names what it finds with one of the static checks of
``runners.base.CheckName``:

- ``static_torch_op``: the forward path computes with PyTorch (``torch.*``, ``F.*``, tensor
  methods such as ``x.sum()``, the ``@`` operator, ``torch.nn`` modules, ``torch.compile``)
  or on the host (NumPy and other array libraries, imported or reached anywhere in the
  file, ``.tolist()``); a PyTorch compute function stored or passed as a value anywhere; a
  ``@triton.jit`` body calling anything but Triton, a few builtins or another kernel.
- ``static_reference_call``: the forward path runs the reference (``Model(...)``,
  ``super().forward``), or the file loads code at run time (an import of the reference,
  importlib, exec, eval).
- ``static_fallback``: an error is caught and PyTorch or the reference does the work instead.
- ``static_stream``: side streams, events, CUDA graphs, threads, processes, work at exit.
- ``static_tamper``: patching PyTorch, the timer or the harness; reaching into frames and
  tracebacks, other modules, namespaces (``__dict__``, ``vars()``, ``getattr`` with a module
  or a computed name), private PyTorch/Triton internals, the garbage collector or memory;
  signals; environment writes; files.
- ``static_structure``: ModelNew is not one plain top-level ``class ModelNew(nn.Module)``
  statement (built by a factory or an assignment, defined twice or conditionally, with a
  metaclass or decorators, rebound afterwards), or the source is too deeply nested or
  chained to check.

"The forward path" is ModelNew.forward (and ``__call__``, ``__getattr__``), the methods it
calls through ``self`` or ``super()``, the functions and classes of the file it names, the
values of the module-level names it reads, transitively; and, wherever they are, lambdas,
nested functions and the functions and classes the file passes around as values (they can
be called from anywhere). ``@triton.jit`` functions are kernel code: ``tl.*`` is fine there.
``__init__`` may use PyTorch freely, but calling a ``torch.nn`` module (or a reference
instance, or anything else) it stored is checked. The stream, tamper and structure checks and
the run-time loading checks cover the whole file except ``if __name__ == "__main__":`` blocks.

A static check cannot type a Python name: ``a + b`` on tensors is left to the run-time check;
the ``@`` operator and the listed tensor methods are flagged whatever they are called on.
The scan is linear in the size of the source and stops at a deadline (``timeout``).
Only the standard library is imported: this runs in the parent process, which starts fast.

The modules, in the order a scan uses them:

- rules: the allow-lists, the reasons and the rule tables;
- nodes: small helpers on AST names and nodes;
- verdicts: what using a resolved name means;
- findings: Finding, the sink that collects them, the deadline's clock;
- model: the candidate's module resolved once (imports, aliases, definitions, kernels);
- file_scan: the whole-file pass;
- reach: the forward-path reachability walk;
- scan: the entry point, ``check_source``.
"""
