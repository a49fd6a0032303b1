"""What Web Bot Auth costs per request: microseconds to build a request's signature headers.

Times :meth:`beamcrawl.core.net.botauth.Signer.headers` (the @authority, the signature base, one
Ed25519 signature, three header values), the call the fetcher makes before every request,
and, for scale, the Ed25519 signature alone and the library verifier a site would run.

    .venv/bin/python bench/botauth_cost.py [--n 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from types import SimpleNamespace

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from beamcrawl.core.net.botauth import Signer


def _per_call_us(fn, n: int, repeats: int = 5) -> tuple[float, float]:
    """Median and best of ``repeats`` runs, µs per call."""
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(runs), min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="Calls per timed run (5 runs).")
    args = parser.parse_args()
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    signer = Signer.create(pem, "https://crawler.example/beamcrawl")
    urls = [f"http://site{i:04d}.example:8080/p/{i}.html" for i in range(1000)]
    it = iter(range(10**12))

    def sign_request() -> None:
        signer.headers(urls[next(it) % 1000])

    base = b'"@authority": site0001.example\n"signature-agent": "https://crawler.example/"\n"@signature-params": ()'

    rows = [("Signer.headers (per request)", *_per_call_us(sign_request, args.n))]
    rows.append(("Ed25519 sign alone", *_per_call_us(lambda: key.sign(base), args.n)))
    try:
        import http_message_signatures as hms

        headers = dict(signer.headers(urls[1]))
        verifier = hms.HTTPMessageVerifier(
            signature_algorithm=hms.algorithms.ED25519,
            key_resolver=hms.MappingKeyResolver(public_keys={signer.keyid: key.public_key()}, private_keys={}),
        )
        message = SimpleNamespace(method="GET", url=urls[1], headers=headers)
        rows.append(
            (
                "site-side verify (http-message-signatures)",
                *_per_call_us(lambda: verifier.verify(message, expect_tag="web-bot-auth"), max(args.n // 10, 100)),
            )
        )
    except ImportError:
        pass
    print(f"{'what':45s} {'median µs':>10s} {'best µs':>9s}")
    for name, median, best in rows:
        print(f"{name:45s} {median:10.1f} {best:9.1f}")


if __name__ == "__main__":
    main()
