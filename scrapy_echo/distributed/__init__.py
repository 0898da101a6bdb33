"""Distributed mode: many workers, one Redis (see docs/distributed.rst).

- :mod:`.scheduler`: each worker's scheduler (leases, acks, the global budget, no blocking).
- :mod:`.leases`: the leases a worker holds; :mod:`.dedup`: events sent twice applied once.
- :mod:`.planner`: the one worker at a time that holds the state and runs the policy.
- :mod:`.store` and :mod:`.scripts`: keys and atomic Lua scripts (the planner's own:
  :mod:`.planner_scripts`), sent in one round trip each (:mod:`.script_batch`).
- :mod:`.wire`: requests as data, never pickle (the state: :mod:`scrapy_echo.core.snapshot`).
"""
