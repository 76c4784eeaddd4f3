"""A shared pool of tiny LMs (different sizes and specialties) with measured costs.

Used by UniScale (routing x test-time scaling) and meant for FusionRoute and SCOPE later.
"""
