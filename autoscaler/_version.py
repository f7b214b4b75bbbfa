"""The package's version, in a module of its own: any layer may import it (the package's
``__init__`` reaches up to the driver API)."""

__version__ = "0.1.0"
