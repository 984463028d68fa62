"""hvsync backend service."""

__version__ = "0.0.22"
