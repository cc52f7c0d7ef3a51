"""Profiles: the actions a scheduler runs and their settings, as files (:mod:`.schema`), and the
ones shipped with gpudefrag (``kubernetes.toml``, ``suite1b.toml``)."""
