"""The drivers: the loops around the kernels (blocked, parallel, unpacked, batched) and packing."""
