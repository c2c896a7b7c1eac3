"""The workload authority: what work exists, who may run it, and what became of it."""
