"""Requires-Dist lines (wheels.audit.requires): packaging's verdict and packaging's name."""

from __future__ import annotations

import pytest
from packaging.requirements import InvalidRequirement, Requirement

from wheels.audit.requires import InvalidRequires, read_requires

# Lines as popular wheels write them (cryptography, aiohttp, psutil, SQLAlchemy, protobuf, ...).
REAL_LINES = [
    "cffi >=1.12 ; platform_python_implementation != 'PyPy'",
    "bcrypt >=3.1.5 ; extra == 'ssh'",
    "numpy>=1.23",
    "numpy (>=1.0)",
    "torch ; extra == 'gpu'",
    "python-dateutil>=2.7",
    'nvidia-cuda-runtime-cu12==12.4.127; platform_system == "Linux" and platform_machine == '
    '"x86_64"',
    'aiodns>=3.2.0; (sys_platform == "linux" or sys_platform == "darwin") and extra == "speedups"',
    'greenlet !=0.4.17 ; python_version < "3.13" and (platform_machine == "aarch64" or '
    '(platform_machine == "ppc64le" or platform_machine == "x86_64"))',
    "protobuf <6.0dev,>=5.26.1",
    "typing-extensions ; (python_version < \"3.10\") and extra == 'typing'",
    "pytest[testing] ~=8.0.0rc1 ; extra == 'test'",
    "foo[bar, baz]==1.*",
    'cffi>=2.0.0b; (platform_python_implementation != "PyPy" and python_version >= "3.14") and '
    'extra == "cffi"',
    "tensorflow<2.19-1,>=2.18.0.post; extra == 'tf'",
    "foo>=1.0.dev,<2.0_rc_1,!=1.5.r2,~=1.0-preview.3",
]


@pytest.mark.parametrize("line", REAL_LINES)
def test_common_lines_are_read_as_packaging_reads_their_names(line: str) -> None:
    req = read_requires(line)
    assert (req.name, req.text) == (Requirement(line).name, line.strip())
    assert str(req.parsed()) == str(Requirement(line))


@pytest.mark.parametrize(
    "line",
    ["foo-", "foo>=1 2", "foo ; ", "foo ; extra ==", "foo>=1.0.*", "foo~=1", "foo ; (extra == 'x'"],
)
def test_a_line_packaging_rejects_is_invalid_with_its_message(line: str) -> None:
    with pytest.raises(InvalidRequirement) as theirs:
        Requirement(line)
    with pytest.raises(InvalidRequires) as ours:
        read_requires(line)
    assert str(ours.value) == str(theirs.value)


def test_a_line_of_another_form_is_read_by_packaging() -> None:
    line = "foo @ https://example.com/foo-1.0.tar.gz ; os.name == 'posix'"
    req = read_requires(line)
    assert (req.name, req.text) == ("foo", line)
    assert req.parsed().url == "https://example.com/foo-1.0.tar.gz"
