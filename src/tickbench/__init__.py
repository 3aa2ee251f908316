"""tickbench: a reproducible benchmark suite for time-series databases on market data."""

__version__ = "0.1.0"
