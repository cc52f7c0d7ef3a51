"""Suite 3: capacity that changes under the jobs — node failures and repairs, priority classes
and preemption victims, spare capacity, elastic nodes — and its job-level simulator."""
