"""What the crawl learns of each source from its own observations: the new-link rate ``λ``
(with censored counts, overflowing hubs, the week's cycle, overlaps and site pooling), the
click curve ``P, μ``, their priors, and what change signals say."""
