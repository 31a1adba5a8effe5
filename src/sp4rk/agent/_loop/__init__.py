"""The executor's engine, one module per phase of the ReAct lifecycle.

``lifecycle.run_loop`` reads top to bottom as the reference's lifecycle list; each phase lives
in its own module and works on the per-run state in ``state.Run``.
"""
