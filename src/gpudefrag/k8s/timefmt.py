"""RFC 3339 timestamps as Kubernetes writes them (UTC, ``Z`` suffix), to and from epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime


def to_rfc3339(t_s: float, micros: bool | None = None) -> str:
    """``1700000000.25`` -> ``"2023-11-14T22:13:20.250000Z"``.  ``micros=None``: six fractional
    digits only when the microseconds are non-zero; ``True``: always (as ``metav1.MicroTime``);
    ``False``: whole seconds, truncated (as ``metav1.Time``)."""
    dt = datetime.fromtimestamp(t_s, tz=UTC)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if micros or (micros is None and dt.microsecond):
        text += f".{dt.microsecond:06d}"
    return text + "Z"


def from_rfc3339(text: str) -> float:
    """Epoch seconds of an RFC 3339 time (``Z`` or an offset); ``ValueError`` when malformed."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        raise ValueError(f"RFC 3339 time without a time zone: {text!r}")
    return dt.timestamp()
