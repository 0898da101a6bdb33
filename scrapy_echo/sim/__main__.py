"""``python -m scrapy_echo.sim``."""

from __future__ import annotations

import sys

from scrapy_echo.sim.cli import main

sys.exit(main())
