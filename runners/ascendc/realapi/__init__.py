"""Type-checking Ascend C kernels against the real devkit headers on a machine without CANN.

sources.py finds and prepares the real sources (CANN Open Software License: unpacked into
the user's cache at run time, never kept in the repository); standins.py writes our own
headers for the binary-only pieces; typecheck.py runs g++ -fsyntax-only in the sandbox.
"""
