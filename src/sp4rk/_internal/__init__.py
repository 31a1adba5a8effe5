"""Private helpers shared across sp4rk's subpackages. Nothing here imports from sp4rk."""
