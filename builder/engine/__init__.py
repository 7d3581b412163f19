"""Building a plan: the executor and its scheduler, the content-addressed store, the no-op memo,
run reports and progress, CMake presets for a hand rebuild, and store garbage collection."""
