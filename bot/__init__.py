"""opbot: turns an operator request into a pull request holding a verified accelerator kernel."""

__version__ = "0.1.0"
