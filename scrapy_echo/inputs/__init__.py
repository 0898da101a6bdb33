"""Input feeds: clicks and change signals (files tailed as they grow, Redis streams, Python
calls), page-view logs for ranking sites, and the sources file and JOBDIR commands that add or
remove sources while a crawl runs. Every row is checked: a bad one is counted and logged,
never half-applied."""
