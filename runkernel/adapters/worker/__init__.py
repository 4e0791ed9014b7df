"""The worker: the loop that finds Runs with work, leases and drives each (``loop``), the
host applications it loads and the hosts built for them (``apps``), how it drives a push app (``push_drive``, on one
event loop per worker: ``app_loop``), the Runs it sets aside while a model call backs off
(``set_aside``), what it reports (``account``) and how it rides out a store outage
(``outage``).

Modules here may import ``runkernel.adapters.drive`` and everything below it, never the
CLI (``tests/proofs/test_layers.py``)."""
