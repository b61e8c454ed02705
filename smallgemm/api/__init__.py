"""The public API: NumPy semantics and argument checks, then the plan."""
