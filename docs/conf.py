"""Sphinx configuration for scrapy_echo."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

project = "scrapy_echo"
author = "scrapy_echo developers"
copyright = "2026, scrapy_echo developers"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]
napoleon_numpy_docstring = True
autodoc_typehints = "description"
html_theme = "alabaster"
exclude_patterns = ["_build"]
