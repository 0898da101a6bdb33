"""scrapy_echo: find new pages as soon as they appear and crawl the valuable ones first.

The ECHO model (Lefortier et al., CIKM 2013) as a Scrapy plugin. The model layer lives in
:mod:`scrapy_echo.model` and depends on numpy and the standard library only.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
