"""Ascend toolchain output -> typed results, one module per tool family.

- common: the JSON mixin and lenient number reading every parser shares, and
  excerpt_log, the cut of a long log the model is shown;
- compiler: build logs (bisheng/clang, ld.lld, g++, GNU ld, collect2, CMake) as located
  diagnostics, follow-on errors grouped, and bisheng command lines;
- gnu: the g++ / GNU ld / CMake line shapes compiler.py reads;
- runtime: ACL/torch_npu run-time failures;
- msprof: msprof op / msopprof CSVs and console;
- npu_smi: npu-smi tables;
- triton_ascend: triton-ascend compile errors;
- feedback: any result as compact text for the agent loop.

Every parser takes the raw text a tool printed and never raises on text it does not
recognise. The formats were read from real outputs (tests/data/ascend/, see its SOURCES.md).
"""
