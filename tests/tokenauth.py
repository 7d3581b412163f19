"""A token service for docker-registry's ``auth: token`` (the flow GHCR, Docker Hub, Harbor and
GitLab use): a 401 with ``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` sends the
client here with basic credentials, and it answers a JWT (ES256) that the registry checks
against the certificate in its ``rootcertbundle`` (by libtrust key id)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

ISSUER = "infini-test-issuer"
SERVICE = "infini-test-registry"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def libtrust_key_id(key: ec.EllipticCurvePublicKey) -> str:
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    text = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode().rstrip("=")
    return ":".join(text[i : i + 4] for i in range(0, len(text), 4))


class TokenService:
    def __init__(self, workdir: Path, users: dict[str, str]) -> None:
        self.users = users
        self.issued: list[str] = []
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = workdir / "token-cert.pem"
        self.cert.write_bytes(self._certificate().public_bytes(serialization.Encoding.PEM))
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                service.answer(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port: int = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def realm(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def _certificate(self) -> x509.Certificate:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "infini test token issuer")])
        now = datetime.datetime.now(datetime.timezone.utc)
        return (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(self.key, hashes.SHA256())
        )

    def start(self) -> TokenService:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        header = request.headers.get("Authorization", "")
        user, _, password = (
            base64.b64decode(header.removeprefix("Basic ") or "Og==").decode().partition(":")
        )
        if not header.startswith("Basic ") or self.users.get(user) != password:
            request.send_response(401)
            request.end_headers()
            return
        query = parse_qs(urlsplit(request.path).query)
        token = self.token(user, query.get("scope", [""])[0])
        body = json.dumps({"token": token, "access_token": token, "expires_in": 300}).encode()
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    def token(self, user: str, scope: str) -> str:
        kind, _, rest = scope.partition(":")
        name, _, actions = rest.rpartition(":")
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "sub": user,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": [{"type": kind, "name": name, "actions": actions.split(",")}]
            if scope
            else [],
        }
        head = {"typ": "JWT", "alg": "ES256", "kid": libtrust_key_id(self.key.public_key())}
        signing_input = (
            f"{_b64url(json.dumps(head).encode())}.{_b64url(json.dumps(claims).encode())}"
        )
        r, s = decode_dss_signature(
            self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        )
        token = f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"
        self.issued.append(token)
        return token

    def registry_auth(self) -> str:
        """The ``auth:`` section of a docker-registry config that trusts this service."""
        return (
            "auth:\n  token:\n"
            f"    realm: {self.realm}\n    service: {SERVICE}\n    issuer: {ISSUER}\n"
            f"    rootcertbundle: {self.cert}\n"
        )
