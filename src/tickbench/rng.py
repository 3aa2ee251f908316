"""Explicit, named random streams.

Every random draw in tickbench comes from a generator derived from (seed, stream name) by a
stable hash, so any partition of the dataset can be regenerated alone, in any process, and
gives the same numbers. Python's ``hash()`` and global RNGs are never used.
"""

from __future__ import annotations

import hashlib

import numpy as np


def stream_key(seed: int, *names: object) -> int:
    """A 128-bit key for the stream named by ``names`` under ``seed``."""
    text = "\x1f".join([str(seed), *(str(n) for n in names)])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=16).digest(), "little")


def stream(seed: int, *names: object) -> np.random.Generator:
    """A counter-based (Philox) generator for the stream named by ``names`` under ``seed``."""
    return np.random.Generator(np.random.Philox(key=stream_key(seed, *names)))
