"""Google Cloud credentials, checked before anything uses them.

Cloud Bigtable and Cloud Storage clients look for Application Default Credentials when they
first connect. Without any they raise deep inside a round (a long traceback), or retry for a
minute; checking once up front turns that into one line that says what to do.
"""

from __future__ import annotations

__all__ = ["CREDENTIALS_HELP", "NoCredentials", "require_credentials"]

CREDENTIALS_HELP = (
    "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file"
)


class NoCredentials(Exception):
    """No Google Cloud credentials were found; the message is one line saying how to add them."""


def require_credentials(what: str, hint: str = "") -> None:
    """Raises NoCredentials unless Application Default Credentials can be found.

    Args:
        what: What needs them, for the message (``"store bigtable://p/i"``).
        hint: A further way out, appended to the message (``"or use the emulator: ..."``).

    Raises:
        NoCredentials: One line naming ``what``, how to provide credentials, and ``hint``.
    """
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        google.auth.default()
    except DefaultCredentialsError:
        raise NoCredentials(
            f"{what}: no Google Cloud credentials found; {CREDENTIALS_HELP}" + (f"; {hint}" if hint else "")
        ) from None
