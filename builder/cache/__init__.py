"""The remote cache: store entries shared between machines through an OCI registry or a directory.

- :mod:`builder.cache.urls`: ``oci://HOST[:PORT]/REPOSITORY`` and ``file:///DIR``, and where the
  list comes from (``--cache``, ``$INFINI_STACK_CACHE``, stack.yaml's ``cache:``).
- :mod:`builder.cache.oci`: the OCI distribution API over plain HTTP(S), with the registry's
  token flow and basic auth; :mod:`builder.cache.credentials` finds what users keep for it.
- :mod:`builder.cache.filecache`: the same artifact in a shared directory.
- :mod:`builder.cache.artifact`: the artifact (an OCI image manifest per key, a config blob
  holding the signed statement, one zstd tar layer).
- :mod:`builder.cache.relocate`: what in an entry names the store or home it was built under,
  and how a pull rewrites it.
- :mod:`builder.cache.signing`: ed25519 keys, signatures and the trusted keys.
- :mod:`builder.cache.transfer`: look a key up, download it into a staging directory, publish it.

Nothing here knows the store's locking or the pipeline: :mod:`builder.pipeline.cache` takes the
entry lock, stages, commits, and says what happened.
"""
