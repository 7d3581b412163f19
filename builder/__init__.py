"""infini-stack: build, package and audit the Infini stack per accelerator vendor."""

__version__ = "0.1.0"
