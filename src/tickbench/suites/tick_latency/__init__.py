"""tick-latency (after KungfuDB's table 1): X tickers × Y records, one event per write as a
trading system writes them and, separately, in batches; every row read back and checked."""
