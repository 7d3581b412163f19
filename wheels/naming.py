"""The one place that decides wheel names: distribution, local version per vendor, tags."""

from __future__ import annotations

import re
import sys

from packaging.version import Version

from wheels.filename import canonicalize_name
from wheels.record import record

# A CPython extension module's file name: `<module>.<cpython-312-x86_64-linux-gnu|abi3|...>.so`.
EXTENSION_NAME = re.compile(r"^(?P<mod>[A-Za-z_]\w*)\.(cpython-[^./]+|abi3|pypy[^./]*)\.so$")


@record(frozen=True, kw_only=True)
class WheelName:
    """A wheel's name, in its parts."""

    distribution: str  # as written in METADATA
    version: str  # including the local part, e.g. 0.1.0+cu130
    python_tag: str
    abi_tag: str
    platform_tag: str

    @property
    def filename(self) -> str:
        return f"{escaped_name(self.distribution)}-{self.version}-{self.tag}.whl"

    @property
    def tag(self) -> str:
        return f"{self.python_tag}-{self.abi_tag}-{self.platform_tag}"

    @property
    def dist_info(self) -> str:
        return f"{escaped_name(self.distribution)}-{self.version}.dist-info"


def escaped_name(distribution: str) -> str:
    """The distribution's name as wheel file and .dist-info names spell it: ``my_pkg``."""
    return re.sub(r"[^\w\d.]+", "_", canonicalize_name(distribution))


def with_local(version: str, local: str) -> str:
    """``0.1.0`` + ``cu130`` -> ``0.1.0+cu130`` (normalised, validated by packaging)."""
    return str(Version(f"{version}+{local}")) if local else str(Version(version))


def interpreter_tags() -> tuple[str, str]:
    """The CPython tags an extension built for this interpreter needs (``cp311``, ``cp311``)."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return tag, tag


def platform_tag() -> str:
    import sysconfig

    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def wheel_name(
    distribution: str, version: str, local: str, *, platform: str | None = None
) -> WheelName:
    python_tag, abi_tag = interpreter_tags()
    return WheelName(
        distribution=distribution,
        version=with_local(version, local),
        python_tag=python_tag,
        abi_tag=abi_tag,
        platform_tag=platform or platform_tag(),
    )


def vendor_of_local(version: str) -> str | None:
    """Which vendor a version's local part names (``+cpu``, ``+cu130``/``+cuda``, ``+musa40``,
    ``+ppu12``: each vendor's pattern in wheels/policy/vendors.json); None when it names none."""
    from wheels.policy import vendor_of_local as by_local

    local = version.partition("+")[2]
    return by_local(local) if local else None
