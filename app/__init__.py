"""privrank: privacy-preserving ranking surveys."""

__version__ = "0.1.0"
