"""Pages that change after they appear: change rates from refetches, the cost-optimal refresh
interval (Ford et al.), and the refresh lane that spends a share of the budget on them."""
