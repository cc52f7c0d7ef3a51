"""Errors of the connection to the API server (not answers from it), caught by every loop that
must survive a dropped connection: lightkube's HTTP layer (httpx2) and the OS's."""

from __future__ import annotations

import httpx2
from lightkube import ApiError

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx2.HTTPError, OSError)

CALL_ERRORS: tuple[type[BaseException], ...] = (ApiError, httpx2.HTTPError, OSError)
"""An API call's failure of any kind: an error status from the server, or the connection."""
