"""The dataset: calendar, instruments, generator, schema, manifest."""
