"""Types shared by the memory and agent layers: the trajectory and the context-manager seam.

They live below both layers so that ``sp4rk.memory`` implements the executor's interfaces
without importing ``sp4rk.agent``; ``sp4rk.agent`` re-exports them as its public names.
"""
