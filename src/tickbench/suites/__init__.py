"""The benchmarks as data: ids, parameters, output columns, ordering, tolerances."""
