"""stream (after the STAC-M3 ingest harness): the bulk-load day replayed in time order at fixed
rates and as fast as possible by 1..n writers; throughput, submit→acknowledge latency from each
event's intended send time, update visibility, and a market-snapshot query during the ingest."""
