"""Source parsing: the links a hub page, a feed (RSS, Atom, JSON Feed), a sitemap or
robots.txt lists, the publication times they state, and URLs in canonical form. No Scrapy
engine: functions of a response's bytes and URL."""
