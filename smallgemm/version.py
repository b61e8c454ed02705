"""The package version, in a module of its own: the modules that report it import it from here."""

__version__ = "0.1.0"
