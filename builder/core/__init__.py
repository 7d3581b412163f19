"""The bottom layer: errors, the subprocess wrapper, where state lives, host facts, digests.

Nothing here imports any other part of the tool.
"""
