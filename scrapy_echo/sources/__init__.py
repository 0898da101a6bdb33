"""Source parsing: the links a hub page, a feed (RSS, Atom, JSON Feed), a sitemap or
robots.txt lists, the publication times they state, URLs in canonical form, and which hosts
such URLs may name (the address guard). No Scrapy engine: functions of a response's bytes
and URL."""
