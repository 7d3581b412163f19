"""Checks of a built wheel by running it: the import smoke test and the vendor's runtime check."""
