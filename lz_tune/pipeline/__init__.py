"""The driver loop (:mod:`lz_tune.pipeline.driver`) and its parts: weight snapshot publishing,
the train-budget queue, and the worker back-ends (in-process for sync, Ray for async)."""

from lz_tune.pipeline.driver import Driver, make_backend

__all__ = ["Driver", "make_backend"]
