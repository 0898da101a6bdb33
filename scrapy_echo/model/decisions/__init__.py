"""The crawl policies (ECHO-newpages, the paper's reference and the baselines) as decision
rules over plain state, the frontier of waiting pages they choose from, and the registry that
names them."""
