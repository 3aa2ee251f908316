"""durability: kill the engine's processes (SIGKILL) mid-ingest, restart it, and count the
acknowledged rows missing or changed and the recovery time, per durability setting."""
