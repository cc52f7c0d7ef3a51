"""Demand-driven defragmentation: detect a pod blocked by fragmentation, plan the cheapest moves."""
