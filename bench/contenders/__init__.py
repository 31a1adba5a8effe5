"""One module per contender, each with the same small interface.

- ``DISTRIBUTIONS``: the installed packages whose versions the report names.
- ``CONCURRENCY``: ``"asyncio"`` when ``prepare`` returns a coroutine function, ``"threads"``
  when it returns a plain function (S3 then runs each run in its own thread).
- ``prepare(spec, probe)``: build what one run needs (not timed) and return the zero-argument
  callable that performs the run, calling ``probe`` from inside its model and its tool.
"""
