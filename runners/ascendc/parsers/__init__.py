"""Ascend toolchain output -> typed results, one module per tool family.

- common: the JSON mixin and lenient number reading every parser shares;
- compiler: bisheng/clang/ld.lld build logs and bisheng command lines;
- runtime: ACL/torch_npu run-time failures;
- msprof: msprof op / msopprof CSVs and console;
- npu_smi: npu-smi tables;
- triton_ascend: triton-ascend compile errors;
- feedback: any result as compact text for the agent loop.

Every parser takes the raw text a tool printed and never raises on text it does not
recognise. The formats were read from real outputs (tests/data/ascend/, see its SOURCES.md).
"""
