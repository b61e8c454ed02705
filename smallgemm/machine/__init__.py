"""The machine: CPU features and caches, settings, threads and their layer, the compile cache."""
