"""Wheel assembly, naming and tags, in-process ELF reading, vendor policies and the wheel audit.

The audit's entry points: :func:`wheels.audit.audit_wheel`, :func:`wheels.policy.load_vendor_policy`
and :mod:`wheels.audit_report` (``render_text``, ``to_json``).
"""
