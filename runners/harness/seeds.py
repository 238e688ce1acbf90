"""Seeds: one secret per verification, every case's seed derived from it.

The judge draws the run's seed from `secrets` (or takes `--seed` to replay a failure) and
hands it only to the reference worker; the candidate never learns it, so it cannot rebuild
the inputs it will be given.
"""

from __future__ import annotations

import hashlib
import secrets

SEED_LIMIT = 2**31


def draw_seed() -> int:
    return secrets.randbelow(SEED_LIMIT)


def derive_seed(run_seed: int, label: str) -> int:
    """A case's seed: fixed by the run's seed and the case's label, unguessable without it."""
    digest = hashlib.sha256(f"{run_seed}:{label}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % SEED_LIMIT
