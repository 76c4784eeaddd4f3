"""PAPER_SLUG: a throw-away paper (tests/workflow/paper_template/): E[max of k iid U(0,1)] by Monte
Carlo against its closed form k/(k+1)."""
