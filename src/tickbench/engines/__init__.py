"""Engines under test, one folder each; see :mod:`tickbench.engines.base` for the contract."""
