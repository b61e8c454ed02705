"""Runnable examples of ``smallgemm.nn`` (``python -m smallgemm.nn.examples.digits``)."""
