"""The runner: the only part of tickbench that reads a clock."""
