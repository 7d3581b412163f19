"""Pinned sources: fetching and verifying checkouts (:mod:`.fetch`), bundles for hosts without
the network (:mod:`.bundle`), and resolving a branch or tag to a pin (:mod:`.lock`)."""
