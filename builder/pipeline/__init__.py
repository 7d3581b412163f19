"""What commands share: typed requests, the context they open, and the stages they chain.

A command parses its arguments into a request (:mod:`.requests`) and makes one call here:
:mod:`.build`, :mod:`.wheel`, :mod:`.release`. Nothing below this layer sees argparse.
"""
