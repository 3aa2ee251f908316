"""concurrency (the STAC-M3 users dimension): 1, 2, 4, 8 … clients running the published query
mix at once; queries/s and latency percentiles."""
