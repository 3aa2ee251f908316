"""Apache DataFusion (in-process) over a Parquet store of its own."""
