"""No credential leaves the tool: every URL form redacted, ordinary text left alone, and the
places text leaves through (errors, command lines, logs, records, plans) apply it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.core import proc
from builder.core.errors import CommandFailed, SourceError
from builder.core.redact import redact, redact_data, register_secret, strip_userinfo

SECRET = "ghp_S3cr3tT0k3nValue"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"cannot fetch component 'infinirt' (https://oauth2:{SECRET}@github.com/I/R.git)",
            "cannot fetch component 'infinirt' (https://***@github.com/I/R.git)",
        ),
        (f"https://{SECRET}@github.com/org/repo.git", "https://***@github.com/org/repo.git"),
        ("https://user:p@ss@host.example/x", "https://***@host.example/x"),
        ("ssh://git@github.com/org/repo.git", "ssh://***@github.com/org/repo.git"),
        ("git@github.com:org/repo.git", "***@github.com:org/repo.git"),
        (
            f"--mirror https://ci:{SECRET}@github.com/InfiniTensor/=/srv/mirrors/",
            "--mirror https://***@github.com/InfiniTensor/=/srv/mirrors/",
        ),
        (
            f"--mirror=https://github.com/=https://bot:{SECRET}@mirror.example/git/",
            "--mirror=https://github.com/=https://***@mirror.example/git/",
        ),
        (f"oci://robot:{SECRET}@registry:5000/cache", "oci://***@registry:5000/cache"),
        (
            f"https://s3.example/b?X-Amz-Signature={SECRET}&x=1",
            "https://s3.example/b?X-Amz-Signature=***&x=1",
        ),
        (f"GET /v2/?access_token={SECRET}", "GET /v2/?access_token=***"),
        (f"Authorization: Bearer {SECRET}", "Authorization: Bearer ***"),
    ],
)
def test_every_url_form_loses_its_credentials(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert SECRET not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "memcpy@GLIBC_2.14 needed by libfoo.so",
        "-DCMAKE_INSTALL_PREFIX=/srv/store/abc/prefix -DWITH_CPU=ON",
        "https://github.com/InfiniTensor/InfiniRT.git @ 08677bb",
        "mail bob@example.com: see you",
        "oci://127.0.0.1:5000/infini/cache",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_a_registered_secret_is_masked_anywhere() -> None:
    register_secret("registry-password-xyz")
    assert redact("the body said registry-password-xyz!") == "the body said ***!"
    register_secret("ab")  # too short to mask safely
    assert redact("ab cd") == "ab cd"


def test_data_and_identity_forms() -> None:
    data = {"source": f"https://u:{SECRET}@h/r.git @ x", "list": [f"oci://a:{SECRET}@h/r"], "n": 1}
    assert SECRET not in json.dumps(redact_data(data))
    assert redact_data(data)["n"] == 1
    assert strip_userinfo(f"https://u:{SECRET}@h/r.git") == "https://h/r.git"
    assert strip_userinfo("https://***@h/r.git") == "https://h/r.git"


def test_errors_command_lines_and_logs_are_redacted(tmp_path: Path) -> None:
    url = f"https://oauth2:{SECRET}@127.0.0.1:9/repo.git"
    assert SECRET not in SourceError(f"cannot fetch ({url})", hint=url).render()
    assert SECRET not in proc.quote(["git", "fetch", url])
    log = tmp_path / "step.log"
    with pytest.raises(CommandFailed) as failed:
        proc.run(["sh", "-c", f"echo fatal: unable to access {url}; exit 3"], log=log)
    assert SECRET not in failed.value.render() and SECRET not in failed.value.tail
    assert SECRET not in log.read_text() and "https://***@127.0.0.1:9/repo.git" in log.read_text()


def test_the_git_cache_of_a_repository_does_not_depend_on_its_credentials(tmp_path: Path) -> None:
    from builder.core.layout import Layout

    layout = Layout(home=tmp_path, store_root=tmp_path / "store")
    plain = layout.git_cache("https://github.com/org/repo.git")
    assert layout.git_cache(f"https://x:{SECRET}@github.com/org/repo.git") == plain
    assert SECRET not in str(plain)


def test_the_no_op_memo_records_no_credential_of_the_environment() -> None:
    from builder.noop import build_env

    env = {
        "INFINI_STACK_HOME": "/h",
        "INFINI_STACK_CACHE_PASSWORD": SECRET,
        "INFINI_STACK_CACHE_SIGNING_KEY": SECRET,
        "SCCACHE_REDIS": f"redis://:{SECRET}@cache:6379",
        "CMAKE_GENERATOR": "Ninja",
    }
    assert build_env(env) == {"INFINI_STACK_HOME": "/h", "CMAKE_GENERATOR": "Ninja"}
