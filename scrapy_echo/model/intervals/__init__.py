"""The interval problem: each source's optimal recrawl interval under the budget (the ECHO
paper's Algorithm 1 and what goes past it: per-host limits, hubs that show only their latest
links), and the plan a policy reads."""
