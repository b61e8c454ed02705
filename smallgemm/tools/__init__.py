"""Tools over the library: the benchmark and the kernel ladder."""
