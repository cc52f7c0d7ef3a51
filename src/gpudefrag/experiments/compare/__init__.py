"""``gpudefrag compare``: every scheduler of suite 2 on a user's own job trace."""
