"""scaling: each published query over a day, a week and a month, at the run's scale and at a
larger one; how latency grows with the rows read (the log-log slope)."""
