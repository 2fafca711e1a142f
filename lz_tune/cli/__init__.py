"""The command line, ``python -m lz_tune <command>``: :mod:`lz_tune.cli.main` parses and
dispatches; one module per command (``train``, ``tune``, ``evaluate``, ``config``), each reading
top to bottom; :mod:`lz_tune.cli.signals` the process's Ctrl-C / SIGTERM handling.

This package's ``__init__`` imports nothing, so that ``python -m lz_tune`` can install its signal
handlers before torch and Ray load.
"""
