"""Whether the tests run on CI (``CI`` set, as CI services set it): there nothing may be
skipped, so a test that lacks what it needs (PostgreSQL, Chromium) fails instead."""

from __future__ import annotations

import os

ON_CI = os.environ.get("CI", "").lower() not in ("", "0", "false")
"""Read at import, before the tests' environment is cleaned."""
